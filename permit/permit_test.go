package permit_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/toolgate/toolgate/permit"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
)

func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, priv, err := signed.GenerateKey()
	require.NoError(t, err)
	return priv
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// The test activity environment's activity: workflow default-test-workflow-id,
// run default-test-run-id, activity id "0", task queue default-test-taskqueue.
const (
	testWorkflow = "default-test-workflow-id"
	testRun      = "default-test-run-id"
	testActivity = "0"
	testQueue    = "default-test-taskqueue"
)

var closeArgs = json.RawMessage(`{"ticket_id":"TKT-3"}`)

// claimsFor is a permit's claims for the test environment's activity
// close_ticket, approved by alice at the gate.
func claimsFor(t *testing.T) permit.Claims {
	t.Helper()
	d, err := tool.Digest("close_ticket", closeArgs)
	require.NoError(t, err)
	return permit.Claims{
		ID: permit.IDFor(testWorkflow, testRun, testActivity), WorkflowID: testWorkflow, RunID: testRun,
		ActivityID: testActivity, Activity: "close_ticket", TaskQueue: testQueue,
		CallID: "c-3", Tool: "close_ticket", ArgsDigest: d, Key: "run-1/c-3", Destructive: true,
		Approver: "alice", Kind: string(tool.ApprovedAtGate), Rules: "r1", IssuedAt: 1,
	}
}

func requestFor(tok string) tool.Request {
	return tool.Request{CallID: "c-3", IdempotencyKey: "run-1/c-3", Args: closeArgs,
		Approval: &tool.Approval{Approver: "alice", Kind: tool.ApprovedAtGate}, Permit: tok}
}

func TestSignVerifyRoundTrip(t *testing.T) {
	k := newKey(t)
	c := claimsFor(t)
	tok, err := permit.Sign(k, c)
	require.NoError(t, err)
	got, err := permit.Verify(tok, permit.NewKeys(pub(k)))
	require.NoError(t, err)
	c.Version, c.KeyID = permit.Version, permit.KeyID(pub(k))
	require.Equal(t, c, got)
}

func TestVerifyRefuses(t *testing.T) {
	k, other := newKey(t), newKey(t)
	tok, err := permit.Sign(k, claimsFor(t))
	require.NoError(t, err)
	parts := strings.Split(tok, ".")
	// A payload changed after signing: the approver becomes mallory.
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	forgedPayload := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), `"alice"`, `"mallory"`, 1)))
	// An approver's token (another typ) signed with the worker's own key.
	approverTok, err := signed.Sign(k, signed.Claims{Approver: "alice", WorkflowID: testWorkflow, Action: signed.ActionApprove, IssuedAt: 1, Expiry: 2})
	require.NoError(t, err)
	for _, tc := range []struct {
		name, tok string
		keys      permit.Keys
		want      error
	}{
		{"none", "", permit.NewKeys(pub(k)), permit.ErrMissing},
		{"another worker's key", tok, permit.NewKeys(pub(other)), permit.ErrUnknownKey},
		{"a forged payload", parts[0] + "." + forgedPayload + "." + parts[2], permit.NewKeys(pub(k)), permit.ErrBadSignature},
		{"an approver's token", approverTok, permit.NewKeys(pub(k)), permit.ErrMalformed},
		{"not compact", "abc", permit.NewKeys(pub(k)), permit.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := permit.Verify(tc.tok, tc.keys)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

// check runs Verifier.Check as the test environment's activity close_ticket.
func check(t *testing.T, v *permit.Verifier, req tool.Request) error {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(func(ctx context.Context, req tool.Request) error {
		_, err := v.Check(ctx, req)
		return err
	}, activity.RegisterOptions{Name: "close_ticket"})
	_, err := env.ExecuteActivity("close_ticket", req)
	return err
}

// Each field a permit binds is checked against the activity at hand: a
// permit of another run, activity, call, arguments or decision is refused.
func TestCheckBindsTheActivityCallAndDecision(t *testing.T) {
	k := newKey(t)
	v := &permit.Verifier{Keys: permit.NewKeys(pub(k)), Claims: permit.NewMemoryClaimer()}
	sign := func(edit func(*permit.Claims)) string {
		c := claimsFor(t)
		edit(&c)
		tok, err := permit.Sign(k, c)
		require.NoError(t, err)
		return tok
	}
	require.NoError(t, check(t, v, requestFor(sign(func(*permit.Claims) {}))))
	for name, edit := range map[string]func(*permit.Claims){
		"another workflow": func(c *permit.Claims) { c.WorkflowID = "attacker" },
		"another run":      func(c *permit.Claims) { c.RunID = "r-2" },
		"another activity": func(c *permit.Claims) { c.ActivityID = "c-3#2" },
		"another type":     func(c *permit.Claims) { c.Activity = "search_tickets" },
		"another queue":    func(c *permit.Claims) { c.TaskQueue = "attacker-queue" },
		"another call":     func(c *permit.Claims) { c.CallID = "c-4" },
		"other arguments":  func(c *permit.Claims) { c.ArgsDigest = strings.Repeat("0", 64) },
		"another key":      func(c *permit.Claims) { c.Key = "run-1/c-4" },
		"another approver": func(c *permit.Claims) { c.Approver = "bob" },
		"another kind":     func(c *permit.Claims) { c.Kind = string(tool.ApprovedInterrupt) },
		"no decision":      func(c *permit.Claims) { c.Approver, c.Kind = "", "" },
	} {
		t.Run(name, func(t *testing.T) {
			err := check(t, v, requestFor(sign(edit)))
			require.Error(t, err)
			require.Contains(t, err.Error(), "permit")
		})
	}
	t.Run("rules other than the worker's", func(t *testing.T) {
		strict := *v
		strict.Rules = func(string) (string, bool) { return "r2", true }
		err := check(t, &strict, requestFor(sign(func(*permit.Claims) {})))
		require.ErrorContains(t, err, "differ from this worker's own")
	})
	t.Run("a destructive call with no decision at all", func(t *testing.T) {
		req := requestFor(sign(func(c *permit.Claims) { c.Approver, c.Kind = "", "" }))
		req.Approval = nil
		err := check(t, v, req)
		require.ErrorContains(t, err, "names no decision")
	})
	t.Run("no permit", func(t *testing.T) {
		err := check(t, v, requestFor(""))
		require.ErrorContains(t, err, "carries no permit")
	})
}

// A destructive permit runs one activity: the same activity again (a retry)
// may claim it, another may not.
func TestClaimOnce(t *testing.T) {
	m := permit.NewMemoryClaimer()
	c := claimsFor(t)
	require.NoError(t, m.Claim(context.Background(), c, "wf/run/c-3@1"))
	require.NoError(t, m.Claim(context.Background(), c, "wf/run/c-3@1"), "the same activity, again")
	err := m.Claim(context.Background(), c, "wf/run/c-3@2")
	require.True(t, errors.Is(err, permit.ErrUsed), "%v", err)
}

func TestLoadOrCreateKeyKeepsOneKey(t *testing.T) {
	dir := t.TempDir()
	a, err := permit.LoadOrCreateKey(dir + "/" + permit.WorkerKeyFile)
	require.NoError(t, err)
	b, err := permit.LoadOrCreateKey(dir + "/" + permit.WorkerKeyFile)
	require.NoError(t, err)
	require.Equal(t, a, b)
	// Its public key, beside it, is what tool hosts on other queues trust.
	keys, err := permit.ReadPublicKeys(dir + "/" + permit.WorkerPublicKeyFile)
	require.NoError(t, err)
	require.Equal(t, permit.NewKeys(pub(a)), keys)
}
