package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/workflows"
)

// SignatureHeader is the header that carries a webhook delivery's signature.
const SignatureHeader = "X-Toolgate-Signature"

// DefaultSignatureWindow is how far a signature's time may be from the
// receiver's clock when VerifySignature is given no window.
const DefaultSignatureWindow = 5 * time.Minute

// WebhookBody is what a webhook receives: every field of the notification,
// the delivery's idempotency key, and the confirm page's link when there is
// one.
type WebhookBody struct {
	workflows.Notification
	Delivery string `json:"delivery"`
	Link     string `json:"link,omitempty"`
}

// sendWebhook POSTs n, signed with t's secret, to t's URL.
func (s *Sender) sendWebhook(ctx context.Context, t Target, n workflows.Notification, key string, lg *linkLog) (string, error) {
	if t.Secret == "" {
		return "", refused("no secret: every webhook delivery is signed")
	}
	link, err := s.linkFor(lg, n, t.Name, ViaWebhook) // whoever the receiver shows it to: no one in particular
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(WebhookBody{Notification: n, Delivery: key, Link: link.URL})
	if err != nil {
		return "", refused("encode the body: %v", err)
	}
	return s.post(ctx, t, t.Webhook, body, map[string]string{
		"Idempotency-Key":  key,
		"X-Toolgate-Event": n.Event,
		SignatureHeader:    Sign(t.Secret, s.now(), body),
	})
}

// Sign is the X-Toolgate-Signature of body sent at at:
// "t=UNIX_SECONDS,v1=HEX(HMAC-SHA256(secret, "UNIX_SECONDS." + body))".
func Sign(secret string, at time.Time, body []byte) string {
	ts := strconv.FormatInt(at.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return m.Sum(nil)
}

// VerifySignature is a webhook receiver's check of a delivery: header (the
// X-Toolgate-Signature) must be well formed, its time within window of now
// (DefaultSignatureWindow when window is 0 or less), and one of its v1
// signatures body's under secret. With no secret it refuses every delivery.
func VerifySignature(secret, header string, body []byte, now time.Time, window time.Duration) error {
	if secret == "" {
		return errors.New("no secret: refusing every delivery")
	}
	if header == "" {
		return fmt.Errorf("no %s header", SignatureHeader)
	}
	if window <= 0 {
		window = DefaultSignatureWindow
	}
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("malformed %s header: %.40q is not KEY=VALUE", SignatureHeader, part)
		}
		switch k {
		case "t":
			if ts != "" {
				return fmt.Errorf("malformed %s header: t given twice", SignatureHeader)
			}
			ts = v
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil || len(sig) != sha256.Size {
				return fmt.Errorf("malformed %s header: v1 is not a hex SHA-256 HMAC", SignatureHeader)
			}
			sigs = append(sigs, sig)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ts == "" {
		return fmt.Errorf("malformed %s header: no t=UNIX_SECONDS", SignatureHeader)
	}
	if len(sigs) == 0 {
		return fmt.Errorf("malformed %s header: no v1 signature", SignatureHeader)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > window || d < -window {
		return fmt.Errorf("signature time %s is more than %s from now", time.Unix(sec, 0).UTC().Format(time.RFC3339), window)
	}
	want := mac(secret, ts, body)
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return nil
		}
	}
	return errors.New("signature mismatch: not signed with this secret, or the body was changed")
}
