package workflows_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"

	"github.com/toolgate/toolgate/permit"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
)

// remoteHost stands in for a worker in another language: activities
// registered by type name, answering any JSON value, that check the permit
// the gate's worker signed (permit.Guard, with the gate's public key) and
// record what they were called with and on which task queue.
type remoteHost struct {
	mu       sync.Mutex
	calls    []remoteCall
	verifier *permit.Verifier
}

type remoteCall struct {
	activity, taskQueue string
	req                 tool.Request
}

func (h *remoteHost) activity(name string, result string) func(ctx context.Context, req tool.Request) (json.RawMessage, error) {
	return permit.Guard(h.verifier, func(ctx context.Context, req tool.Request) (json.RawMessage, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.calls = append(h.calls, remoteCall{activity: name, taskQueue: activity.GetInfo(ctx).TaskQueue, req: req})
		return json.RawMessage(result), nil
	})
}

func (h *remoteHost) of(name string) []remoteCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []remoteCall
	for _, c := range h.calls {
		if c.activity == name {
			out = append(out, c)
		}
	}
	return out
}

// newFixtureRemote is a fixture whose worker also declares three tools
// hosted on the task queue other-language-tools, their activities
// registered on its environment by type name as h's, checking the permits
// the fixture's worker signs with its worker key.
func newFixtureRemote(t *testing.T, h *remoteHost) *fixture {
	f := bareFixture(t, newDesk())
	_, key, err := signed.GenerateKey()
	require.NoError(t, err)
	h.verifier = &permit.Verifier{Keys: permit.NewKeys(key.Public().(ed25519.PublicKey)), Claims: permit.NewMemoryClaimer()}
	f.env.RegisterActivityWithOptions(h.activity("orderStatus", `{"order":"O-1","status":"shipped"}`), activity.RegisterOptions{Name: "orderStatus"})
	f.env.RegisterActivityWithOptions(h.activity("fx_remote", `1.08`), activity.RegisterOptions{Name: "fx_remote"})
	f.env.RegisterActivityWithOptions(h.activity("refund_remote", `{"refund_id":"R-1","paid":true}`), activity.RegisterOptions{Name: "refund_remote"})
	q := "other-language-tools"
	require.NoError(t, registerOn(f, f.desk, func(o *worker.Options) {
		o.WorkerKey = key
		o.Tools = append(o.Tools,
			tool.Tool{Spec: tool.Spec{Name: "status_remote", TaskQueue: q, Activity: "orderStatus"}},
			tool.Tool{Spec: tool.Spec{Name: "fx_remote", TaskQueue: q, NoMemo: true}},
			tool.Tool{Spec: tool.Spec{Name: "refund_remote", TaskQueue: q, Destructive: true}},
		)
	}))
	return f
}

// A tool another worker hosts runs on its task queue, as the activity type it
// was declared with, with the call's id, idempotency key and arguments; its
// result is what it returned; a repeated read is answered from the memo
// unless the tool says no_memo.
func TestRemoteToolsRunOnTheirTaskQueueAndMemoize(t *testing.T) {
	h := &remoteHost{}
	f := newFixtureRemote(t, h)
	res := f.run(scripted(
		steps(call("status_remote", `{"order":"O-1"}`)),
		steps(call("status_remote", `{"order":"O-1"}`)),
		steps(call("fx_remote", `{"pair":"EURUSD"}`)),
		steps(call("fx_remote", `{"pair":"EURUSD"}`)),
	))
	require.Equal(t, []string{"c-1:status_remote:ok", "c-2:status_remote:cache_hit", "c-3:fx_remote:ok", "c-4:fx_remote:ok"}, statuses(res.Trace))
	st := h.of("orderStatus")
	require.Len(t, st, 1, "the second read was answered from the memo")
	require.Equal(t, "other-language-tools", st[0].taskQueue)
	require.Equal(t, "c-1", st[0].req.CallID)
	require.NotEmpty(t, st[0].req.IdempotencyKey)
	require.JSONEq(t, `{"order":"O-1"}`, string(st[0].req.Args))
	require.JSONEq(t, `{"order":"O-1","status":"shipped"}`, string(res.Trace[0].Result), "the remote worker's value is the result, no envelope")
	require.Len(t, h.of("fx_remote"), 2, "no_memo: every call runs")
}

// A destructive tool another worker hosts is gated like the worker's own: a
// rejected call never reaches it, an approved one reaches it once.
func TestRemoteDestructiveToolIsGated(t *testing.T) {
	h := &remoteHost{}
	f := newFixtureRemote(t, h)
	f.at(time.Minute, func() {
		require.Equal(t, []string{"gate:refund_remote"}, f.next())
		f.reject("c-1", "wrong order")
	})
	f.at(2*time.Minute, func() {
		require.Empty(t, h.of("refund_remote"), "a rejected call never reaches the worker that hosts the tool")
		f.approve("c-2")
	})
	res := f.run(scripted(
		steps(call("refund_remote", `{"order":"O-1","amount":5}`)),
		steps(call("refund_remote", `{"order":"O-2","amount":5}`)),
	))
	require.Equal(t, []string{
		"c-1:refund_remote:blocked", "c-1:refund_remote:rejected",
		"c-2:refund_remote:blocked", "c-2:refund_remote:approved", "c-2:refund_remote:ok",
	}, statuses(res.Trace))
	paid := h.of("refund_remote")
	require.Len(t, paid, 1)
	require.Equal(t, "c-2", paid[0].req.CallID)
	require.NotNil(t, paid[0].req.Approval, "the approval reaches the tool")
	require.NotEmpty(t, paid[0].req.Permit, "with the permit it was checked against")
	require.Equal(t, "other-language-tools", paid[0].taskQueue)
}

// The host checks each request's permit before its tool runs: one the
// fixture's worker signed passes (each call above), one signed by a key the
// host does not trust — here, its trusted key is another worker's — is
// refused, not retried, and the tool never runs.
func TestRemoteToolRefusesAPermitOfAKeyItDoesNotTrust(t *testing.T) {
	h := &remoteHost{}
	f := newFixtureRemote(t, h)
	_, other, err := signed.GenerateKey()
	require.NoError(t, err)
	h.verifier.Keys = permit.NewKeys(other.Public().(ed25519.PublicKey))
	res := f.run(scripted(steps(call("status_remote", `{"order":"O-1"}`))))
	require.Equal(t, []string{"c-1:status_remote:error"}, statuses(res.Trace))
	require.Contains(t, res.Trace[0].Error, "not one this worker trusts")
	require.Contains(t, res.Trace[0].Error, "refused: ")
	require.Empty(t, h.of("orderStatus"), "the tool ran for a request it refused")
}
