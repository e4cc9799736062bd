package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/workflows"
)

const hookSecret = "whsec-very-secret-value"

// hookPath is the secret part of the webhook URL.
const hookPath = "/hooks/T0SECRETPATH"

type received struct {
	header http.Header
	body   []byte
}

// hookServer answers every request with status (and body), keeping what it
// received.
func hookServer(t *testing.T, status int, body string) (*httptest.Server, chan received) {
	t.Helper()
	got := make(chan received, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- received{header: r.Header.Clone(), body: b}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func webhookConfig(url string) *Config {
	return &Config{Targets: []Target{{Name: "ops", Webhook: url + hookPath, Secret: hookSecret, Timeout: "2s"}}}
}

func TestWebhookDelivers(t *testing.T) {
	srv, got := hookServer(t, http.StatusOK, "thanks")
	c := webhookConfig(srv.URL)
	pub := withLinks(t, c)
	n := waiting("ops")
	d, err := NewSender(c).Deliver(context.Background(), n)
	require.NoError(t, err)
	key := "run-1/r-1/waiting/c-3/ops"
	links := d.Links
	d.Links = nil
	assert.Equal(t, workflows.Delivery{Target: "ops", Kind: KindWebhook, Detail: "HTTP 200", Key: key}, d)

	r := <-got
	assert.Equal(t, "application/json", r.header.Get("Content-Type"))
	assert.Equal(t, "toolgate", r.header.Get("User-Agent"))
	assert.Equal(t, key, r.header.Get("Idempotency-Key"))
	assert.Equal(t, "waiting", r.header.Get("X-Toolgate-Event"))

	var body map[string]any
	require.NoError(t, json.Unmarshal(r.body, &body))
	for k, want := range map[string]any{
		"event": "waiting", "target": "ops", "workflow_id": "run-1", "run_id": "r-1", "call_id": "c-3",
		"tool": "close_ticket", "args_digest": "d1g3st", "delivery": key,
		"expires_at": n.ExpiresAt.Format(time.RFC3339),
	} {
		assert.Equal(t, want, body[k], k)
	}
	assert.Equal(t, map[string]any{"ticket": "T-1", "note": "<script>alert(1)</script> <!here>"}, body["args"])
	assert.Equal(t, map[string]any{"roles": []any{"support-lead"}, "count": float64(1)}, body["needs"])
	require.Len(t, body["approvers"], 2)
	assert.Equal(t, "alice", body["approvers"].([]any)[0].(map[string]any)["name"])
	link, _ := body["link"].(string)
	require.True(t, strings.HasPrefix(link, "https://toolgate.example/confirm?t="), "link %q", link)
	l, err := VerifyLink(pub, linkToken(t, link), time.Now())
	require.NoError(t, err)
	assert.Equal(t, "ops", l.Recipient, "a webhook's link names its target")
	assert.Equal(t, "webhook", l.Channel)
	assert.Equal(t, "c-3", l.CallID)
	assert.Equal(t, []workflows.LinkProof{{Digest: workflows.LinkDigest(l.Secret), Recipient: "ops", Channel: "webhook"}}, links,
		"the run is told the digest of the one link sent")
	assert.NotContains(t, string(mustJSON(t, d))+fmt.Sprint(links), l.Secret, "and never the secret")

	// The receiver's check.
	sig := r.header.Get(SignatureHeader)
	now := time.Now()
	require.NoError(t, VerifySignature(hookSecret, sig, r.body, now, time.Minute))
	assert.ErrorContains(t, VerifySignature("wrong", sig, r.body, now, time.Minute), "mismatch")
	tampered := []byte(strings.Replace(string(r.body), "close_ticket", "drop_tables!", 1))
	assert.ErrorContains(t, VerifySignature(hookSecret, sig, tampered, now, time.Minute), "mismatch")
	assert.ErrorContains(t, VerifySignature(hookSecret, sig, r.body, now.Add(10*time.Minute), time.Minute), "from now")
	assert.ErrorContains(t, VerifySignature(hookSecret, "", r.body, now, time.Minute), "no X-Toolgate-Signature")
	assert.ErrorContains(t, VerifySignature("", sig, r.body, now, time.Minute), "no secret: refusing every delivery")
}

func linkToken(t *testing.T, link string) string {
	t.Helper()
	_, q, ok := strings.Cut(link, "?t=")
	require.True(t, ok, link)
	tok, err := urlUnescape(q)
	require.NoError(t, err)
	return tok
}

func TestVerifySignatureForms(t *testing.T) {
	body := []byte(`{"event":"test"}`)
	at := time.Unix(1_700_000_000, 0)
	sig := Sign(hookSecret, at, body)
	ts := strconv.FormatInt(at.Unix(), 10)
	require.Regexp(t, `^t=1700000000,v1=[0-9a-f]{64}$`, sig)
	good := strings.TrimPrefix(sig, "t="+ts+",")

	assert.NoError(t, VerifySignature(hookSecret, sig, body, at, 0))
	// Several v1 (a rotated secret): any may match.
	assert.NoError(t, VerifySignature(hookSecret, "t="+ts+",v1="+strings.Repeat("ab", 32)+","+good, body, at, 0))
	for _, h := range []string{
		"garbage", "t=" + ts, good, "t=x," + good, "t=" + ts + ",v1=zz", "t=" + ts + ",v1=abcd", "t=" + ts + ",t=" + ts + "," + good,
	} {
		assert.Error(t, VerifySignature(hookSecret, h, body, at, 0), h)
	}
	// The default window is five minutes, either way.
	assert.NoError(t, VerifySignature(hookSecret, sig, body, at.Add(4*time.Minute), 0))
	assert.Error(t, VerifySignature(hookSecret, sig, body, at.Add(6*time.Minute), 0))
	assert.Error(t, VerifySignature(hookSecret, sig, body, at.Add(-6*time.Minute), 0))
}

// noSecrets checks an error's text quotes neither the secret nor the URL's
// secret path.
func noSecrets(t *testing.T, err error) {
	t.Helper()
	assert.NotContains(t, err.Error(), hookSecret)
	assert.NotContains(t, err.Error(), hookPath)
	assert.NotContains(t, err.Error(), "T0SECRETPATH")
}

func TestWebhookErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("500 retryable", func(t *testing.T) {
		srv, _ := hookServer(t, http.StatusInternalServerError, "boom "+strings.Repeat("x", 5000))
		_, err := NewSender(webhookConfig(srv.URL)).Deliver(ctx, waiting("ops"))
		ae := requireRetryable(t, err)
		assert.True(t, strings.HasPrefix(ae.Message(), "ops (webhook): HTTP 500: boom xxx"), ae.Message())
		assert.Less(t, len(ae.Message()), 300, "the body is clipped")
		noSecrets(t, err)
	})
	for _, code := range []int{http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusBadGateway} {
		srv, _ := hookServer(t, code, "")
		_, err := NewSender(webhookConfig(srv.URL)).Deliver(ctx, waiting("ops"))
		requireRetryable(t, err)
	}
	t.Run("400 refused", func(t *testing.T) {
		// A receiver that echoes what it got: the error must still not show the secret.
		srv, _ := hookServer(t, http.StatusBadRequest, "bad signature for "+hookSecret+" at "+hookPath)
		_, err := NewSender(webhookConfig(srv.URL)).Deliver(ctx, waiting("ops"))
		ae := requireRefused(t, err)
		assert.Contains(t, ae.Message(), "ops (webhook): HTTP 400: bad signature")
		noSecrets(t, err)
	})
	t.Run("redirect not followed", func(t *testing.T) {
		var hit atomic.Int32
		target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit.Add(1) }))
		defer target.Close()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/elsewhere", http.StatusFound)
		}))
		defer srv.Close()
		_, err := NewSender(webhookConfig(srv.URL)).Deliver(ctx, waiting("ops"))
		ae := requireRefused(t, err)
		assert.Contains(t, ae.Message(), "HTTP 302")
		assert.Zero(t, hit.Load(), "the redirect's target received nothing")
		noSecrets(t, err)
	})
	t.Run("timeout retryable", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer srv.Close()
		defer close(release)
		c := webhookConfig(srv.URL)
		c.Targets[0].Timeout = "200ms"
		start := time.Now()
		_, err := NewSender(c).Deliver(ctx, waiting("ops"))
		ae := requireRetryable(t, err)
		assert.Less(t, time.Since(start), 2*time.Second)
		assert.Contains(t, ae.Message(), "no answer within 200ms")
		noSecrets(t, err)
	})
	t.Run("connection refused retryable", func(t *testing.T) {
		srv, _ := hookServer(t, http.StatusOK, "")
		c := webhookConfig(srv.URL)
		srv.Close()
		_, err := NewSender(c).Deliver(ctx, waiting("ops"))
		ae := requireRetryable(t, err)
		assert.Contains(t, ae.Message(), "ops (webhook): POST "+srv.URL+": request failed")
		noSecrets(t, err)
	})
}

func TestShowURL(t *testing.T) {
	assert.Equal(t, "https://hooks.slack.com", showURL("https://hooks.slack.com/services/T0/B0/XYZ?x=1"))
	assert.Equal(t, "(a relative URL)", showURL("/elsewhere"))
	assert.Equal(t, "(a URL that does not parse)", showURL("http://[::1"))
}
