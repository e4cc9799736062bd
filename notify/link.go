package notify

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// ActionLink is the action of a link token: it names a call a human is asked
// to decide, and decides nothing itself (a run refuses it as a decision).
const ActionLink = "link"

// Channels a decision by link comes through (signed.Claims.Via).
const (
	ViaSlack = policy.ViaSlack
	ViaEmail = policy.ViaEmail
	// ViaWebhook: a webhook's link, whose Recipient is the target's name.
	// It names no person, so under a policy it never decides without a
	// signature.
	ViaWebhook = workflows.ViaWebhook
)

// MaxLinkLifetime bounds a link token's life whatever the call's expiry.
const MaxLinkLifetime = 7 * 24 * time.Hour

// Link is what a link token binds: one call of one run, the exact arguments
// it was sent with (ArgsDigest) and the one wait it was sent for (Asked: the
// call's requested_at in Unix nanoseconds — a call that waits again, after a
// rewind, is asked anew), until Expires; Recipient is who it was sent to (an
// approver's name, an address, "slack" for a Slack message's buttons, a
// webhook target's name) and Channel how (slack, email, webhook).
type Link struct {
	WorkflowID string
	CallID     string
	ArgsDigest string
	Asked      int64
	Recipient  string
	Channel    string
	Expires    time.Time
	// Secret is the link's secret, drawn by the delivery that sent it
	// (LinkFor); the run keeps only its digest. Links of runs before rules
	// version 9 have none.
	Secret string
}

// SignLink makes a link token for l, signed with key, issued at now.
func SignLink(key ed25519.PrivateKey, l Link, now time.Time) (string, error) {
	if l.WorkflowID == "" || l.CallID == "" || l.ArgsDigest == "" || l.Asked == 0 || l.Recipient == "" || l.Channel == "" {
		return "", errors.New("link: run, call, args digest, the wait's time (asked), recipient and channel are all required")
	}
	exp := l.Expires
	if limit := now.Add(MaxLinkLifetime); exp.After(limit) {
		exp = limit
	}
	if !exp.After(now) {
		return "", fmt.Errorf("link: expires at %s, not after now", exp.UTC().Format(time.RFC3339))
	}
	return signed.Sign(key, signed.Claims{Approver: l.Recipient, WorkflowID: l.WorkflowID, Action: ActionLink,
		CallID: l.CallID, ArgsDigest: l.ArgsDigest, Asked: l.Asked, Via: l.Channel, Link: l.Secret, IssuedAt: now.Unix(), Expiry: exp.Unix()})
}

// VerifyLink checks a link token's signature against pub, its action and
// its time, and returns what it binds.
func VerifyLink(pub ed25519.PublicKey, token string, now time.Time) (Link, error) {
	c, err := signed.Verify(token, pub)
	if err != nil {
		return Link{}, fmt.Errorf("link refused: %w", err)
	}
	if c.Action != ActionLink {
		return Link{}, fmt.Errorf("link refused: a token for %q, not a link", c.Action)
	}
	if c.CallID == "" || c.ArgsDigest == "" || c.Asked == 0 || c.Via == "" {
		return Link{}, errors.New("link refused: it names no call, arguments, wait or channel")
	}
	if now.Unix() >= c.Expiry {
		return Link{}, fmt.Errorf("link expired at %s", time.Unix(c.Expiry, 0).UTC().Format(time.RFC3339))
	}
	if c.IssuedAt > now.Add(time.Minute).Unix() {
		return Link{}, errors.New("link refused: issued in the future")
	}
	return Link{WorkflowID: c.WorkflowID, CallID: c.CallID, ArgsDigest: c.ArgsDigest, Asked: c.Asked, Recipient: c.Approver, Channel: c.Via,
		Expires: time.Unix(c.Expiry, 0), Secret: c.Link}, nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func splitHostPort(s string) (string, string, error) {
	h, p, err := net.SplitHostPort(s)
	if err == nil && (h == "" || p == "") {
		err = errors.New("empty host or port")
	}
	return h, p, err
}
