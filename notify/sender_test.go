package notify

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

const linkBase = "https://toolgate.example/"

// waiting is a waiting call's notification to target, with text from the
// run that tries to break out of Slack's mrkdwn.
func waiting(target string) workflows.Notification {
	now := time.Now().UTC().Truncate(time.Second)
	return workflows.Notification{
		Event: workflows.NotifyWaiting, Target: target,
		WorkflowID: "run-1", RunID: "r-1", Status: "waiting",
		CallID: "c-3", Tool: "close_ticket", Kind: "gate",
		Args:       json.RawMessage(`{"ticket":"T-1","note":"<script>alert(1)</script> <!here>"}`),
		ArgsDigest: "d1g3st",
		Reason:     "destructive <@here> & more", Rule: "r1",
		Needs: &policy.Approvers{Roles: []string{"support-lead"}, Count: 1},
		Approvers: []workflows.Recipient{
			{Name: "alice", Email: "alice@example.com", Slack: "U123ABC", Via: []string{"slack", "email"}},
			{Name: "bob", Email: "bob@example.com"},
		},
		RequestedAt: now, ExpiresAt: now.Add(time.Hour), At: now,
	}
}

// withLinks is c with link_base and a fresh link key; it returns the key's
// public half.
func withLinks(t *testing.T, c *Config) ed25519.PublicKey {
	t.Helper()
	pub, priv, err := signed.GenerateKey()
	require.NoError(t, err)
	c.LinkBase = linkBase
	c.LinkKeyFile = "link.key"
	c.SetLinkKey(priv)
	return pub
}

// appErr is err as a Temporal application error.
func appErr(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	require.Error(t, err)
	var ae *temporal.ApplicationError
	require.True(t, errors.As(err, &ae), "not an application error: %v", err)
	return ae
}

func requireRetryable(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	ae := appErr(t, err)
	assert.False(t, ae.NonRetryable(), "want retryable: %v", err)
	assert.Equal(t, ErrTypeFailed, ae.Type())
	return ae
}

func requireRefused(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	ae := appErr(t, err)
	assert.True(t, ae.NonRetryable(), "want not retryable: %v", err)
	assert.Equal(t, ErrTypeRefused, ae.Type())
	return ae
}

func TestDeliverUnknownTarget(t *testing.T) {
	c := &Config{Targets: []Target{{Name: "ops", Webhook: "http://127.0.0.1:1/x", Secret: "s"}}}
	_, err := NewSender(c).Deliver(context.Background(), waiting("nope"))
	ae := requireRefused(t, err)
	assert.Contains(t, ae.Message(), "not in this worker's notify file")
}

func TestDeliveryKeyOutsideActivity(t *testing.T) {
	n := waiting("ops")
	assert.Equal(t, "run-1/r-1/waiting/c-3/ops", deliveryKey(context.Background(), n))
}

func TestLinkFor(t *testing.T) {
	c := &Config{}
	n := waiting("ops")
	now := time.Now()
	sl, err := c.LinkFor(n, "alice", "email", now)
	require.NoError(t, err)
	assert.Empty(t, sl, "links off with no link_base")

	pub := withLinks(t, c)
	c.LinkBase = ""
	sl, err = c.LinkFor(n, "alice", "email", now)
	require.NoError(t, err)
	assert.Empty(t, sl, "a key without link_base: no links")
	c.LinkBase = linkBase

	sl, err = c.LinkFor(n, "alice", "email", now)
	require.NoError(t, err)
	assert.Contains(t, sl.URL, "https://toolgate.example/confirm?t=")
	l, err := VerifyLink(pub, sl.Token, now)
	require.NoError(t, err)
	assert.True(t, n.ExpiresAt.Equal(l.Expires))
	l.Expires = n.ExpiresAt
	require.Len(t, l.Secret, 43, "32 random bytes, base64url")
	assert.Equal(t, workflows.LinkProof{Digest: workflows.LinkDigest(l.Secret), Recipient: "alice", Channel: "email"}, sl.Proof,
		"the run is told the digest of the link's secret, never the secret")
	assert.NotContains(t, fmt.Sprint(sl.Proof), l.Secret)
	secret := l.Secret
	l.Secret = ""
	assert.Equal(t, Link{WorkflowID: "run-1", CallID: "c-3", ArgsDigest: "d1g3st", Asked: n.RequestedAt.UnixNano(), Recipient: "alice", Channel: "email",
		Expires: n.ExpiresAt}, l, "the link names the one wait it was sent for")
	again, err := c.LinkFor(n, "alice", "email", now)
	require.NoError(t, err)
	l2, err := VerifyLink(pub, again.Token, now)
	require.NoError(t, err)
	assert.NotEqual(t, secret, l2.Secret, "every link its own secret")

	// A call with no deadline: the link's own lifetime bounds it.
	n.ExpiresAt = time.Time{}
	sl, err = c.LinkFor(n, "alice", "email", now)
	require.NoError(t, err)
	l, err = VerifyLink(pub, sl.Token, now)
	require.NoError(t, err)
	assert.Equal(t, now.Add(MaxLinkLifetime).Unix(), l.Expires.Unix())

	n.Event = workflows.NotifyDecided
	sl, err = c.LinkFor(n, "alice", "email", now)
	require.NoError(t, err)
	assert.Empty(t, sl, "a link only for a waiting call")
}

func urlUnescape(s string) (string, error) { return url.QueryUnescape(s) }

// As the activity, the key is the activity's own identity: the same for
// every retry of it, whatever the notification says.
func TestDeliverAsActivity(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Idempotency-Key")
	}))
	defer srv.Close()
	s := NewSender(&Config{Targets: []Target{{Name: "ops", Webhook: srv.URL + "/h", Secret: "s"}}})

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(s.Deliver, activity.RegisterOptions{Name: workflows.NotifyActivity})
	val, err := env.ExecuteActivity(workflows.NotifyActivity, waiting("ops"))
	require.NoError(t, err)
	var d workflows.Delivery
	require.NoError(t, val.Get(&d))
	assert.Equal(t, d.Key, <-got)
	assert.Regexp(t, `^default-test-workflow-id/default-test-run-id/[^/]+$`, d.Key)

	_, err = env.ExecuteActivity(workflows.NotifyActivity, waiting("nope"))
	assert.ErrorContains(t, err, "is not in this worker's notify file")
}
