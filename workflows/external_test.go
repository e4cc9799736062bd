package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// external is the input of a run whose calls are proposed from outside.
func external() workflows.RunInput {
	return workflows.RunInput{Goal: "MCP session", Planner: plan.Config{Kind: plan.KindExternal}, IdleTimeout: workflows.Duration(time.Hour)}
}

func (f *fixture) propose(toolName, args, key string) *outcome[workflows.CallStatus] {
	return sendUpdate[workflows.CallStatus](f, workflows.UpdatePropose, workflows.Proposal{Tool: toolName, Args: json.RawMessage(args), Key: key})
}

func (f *fixture) call(callID string) workflows.CallStatus {
	f.t.Helper()
	v, err := f.env.QueryWorkflow(workflows.QueryCall, callID)
	require.NoError(f.t, err)
	var st workflows.CallStatus
	require.NoError(f.t, v.Get(&st))
	return st
}

// failureType is the ApplicationError type of a refused update.
func failureType(t *testing.T, err error) string {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	return appErr.Type()
}

// A read proposed twice is one activity and one memo hit; the run ends
// when idle_timeout passes with no call open.
func TestExternalReadTwiceIsOneActivity(t *testing.T) {
	f := newFixture(t)
	var first, second *outcome[workflows.CallStatus]
	f.at(time.Second, func() { first = f.propose("search_tickets", `{"query":"login"}`, "") })
	f.at(2*time.Second, func() { second = f.propose("search_tickets", `{ "query" : "login" }`, "") })
	start := f.env.Now()
	res := f.run(external())
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, 2*time.Second+time.Hour, f.env.Now().Sub(start), "ended when idle for idle_timeout after the last call")
	require.True(t, first.done && second.done)
	require.NoError(t, first.err)
	require.NoError(t, second.err)
	require.Equal(t, "c-1", first.result.CallID)
	require.True(t, first.result.Done)
	require.Equal(t, workflows.TraceOK, first.result.Status)
	require.JSONEq(t, `{"tickets":[{"id":"TKT-3","title":"Cannot log in"}]}`, string(first.result.Result))
	require.Equal(t, "c-2", second.result.CallID, "a finished read proposed again is a new call")
	require.False(t, second.result.Attached)
	require.Equal(t, workflows.TraceCacheHit, second.result.Status)
	require.Equal(t, 1, f.desk.count("search_tickets"))
	require.Equal(t, []string{"c-1:search_tickets:ok", "c-2:search_tickets:cache_hit"}, statuses(res.Trace))
}

// A destructive call waits for a human without holding back the calls
// proposed after it; the same call proposed again attaches to it; its key
// names it after it has finished, and only it; it ran once.
func TestExternalDestructiveCallWaitsAndAttaches(t *testing.T) {
	f := newFixture(t)
	var waiting, read, again, byKey, otherArgs, unknown *outcome[workflows.CallStatus]
	const closeArgs = `{"ticket_id":"TKT-3"}`
	f.at(time.Second, func() { waiting = f.propose("close_ticket", closeArgs, "k-1") })
	f.at(2*time.Second, func() {
		require.True(t, waiting.done, "the update answers once the call waits")
		require.NoError(t, waiting.err)
		require.False(t, waiting.result.Done)
		require.NotNil(t, waiting.result.Waiting)
		require.Equal(t, "c-1", waiting.result.Waiting.CallID)
		require.Equal(t, f.digest("c-1"), waiting.result.ArgsDigest)
		require.Equal(t, workflows.StatusWaitingForApproval, f.state().Status)
		read = f.propose("search_tickets", `{"query":"login"}`, "")
	})
	f.at(3*time.Second, func() {
		require.True(t, read.done, "a read is not held back by a call waiting for a human")
		require.Equal(t, workflows.TraceOK, read.result.Status)
		again = f.propose("close_ticket", closeArgs, "") // no key: the unfinished call of the same arguments
	})
	f.at(4*time.Second, func() {
		require.True(t, again.done, "%+v %v", again, f.next())
		require.True(t, again.result.Attached, "%+v", again.result)
		require.Equal(t, "c-1", again.result.CallID)
		require.NotNil(t, again.result.Waiting)
		f.approve("c-1")
	})
	f.at(5*time.Second, func() {
		st := f.call("c-1")
		require.True(t, st.Done)
		require.Equal(t, workflows.TraceOK, st.Status)
		require.JSONEq(t, `{"id":"TKT-3","status":"closed"}`, string(st.Result))
		byKey = f.propose("close_ticket", closeArgs, "k-1")
		otherArgs = f.propose("close_ticket", `{"ticket_id":"TKT-4"}`, "k-1")
		unknown = f.propose("no_such_tool", `{}`, "")
	})
	f.at(6*time.Second, func() { f.env.SignalWorkflow(workflows.SignalEnd, nil) })
	res := f.run(external())
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.True(t, byKey.done)
	require.NoError(t, byKey.err)
	require.True(t, byKey.result.Attached)
	require.Equal(t, "c-1", byKey.result.CallID)
	require.Equal(t, workflows.TraceOK, byKey.result.Status)
	require.ErrorContains(t, otherArgs.err, `idempotency key "k-1" names call c-1`)
	require.Equal(t, workflows.RefusedInput, failureType(t, otherArgs.err))
	require.NoError(t, unknown.err)
	require.Equal(t, workflows.TraceError, unknown.result.Status)
	require.Contains(t, unknown.result.Error, `no tool named "no_such_tool"`)
	require.Equal(t, 1, f.desk.closed["TKT-3"], "closed once")
	require.Equal(t, 1, f.desk.count("close_ticket"))
	require.Equal(t, []string{"c-1:close_ticket:blocked", "c-2:search_tickets:ok", "c-1:close_ticket:approved", "c-1:close_ticket:ok",
		"c-3:no_such_tool:error"}, statuses(res.Trace))
}

// A rejection is the call's outcome, with the approver's reason.
func TestExternalRejection(t *testing.T) {
	f := newFixture(t)
	var p *outcome[workflows.CallStatus]
	f.at(time.Second, func() { p = f.propose("close_ticket", `{"ticket_id":"TKT-3"}`, "") })
	f.at(2*time.Second, func() { f.reject("c-1", "wrong ticket") })
	f.at(3*time.Second, func() {
		st := f.call("c-1")
		require.True(t, st.Done)
		require.Equal(t, workflows.TraceRejected, st.Status)
		require.Equal(t, "not executed: rejected by bob: wrong ticket", st.Error)
		f.env.SignalWorkflow(workflows.SignalEnd, nil)
	})
	res := f.run(external())
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.NoError(t, p.err)
	require.Zero(t, f.desk.count("close_ticket"))
}

// Proposals are refused, saying why, where they cannot be taken: a run of
// another planner, a key past its bound, more open calls than MaxOpenCalls,
// a run that was ended. The run goes on.
func TestExternalProposalsRefused(t *testing.T) {
	f := newFixture(t)
	var open []*outcome[workflows.CallStatus]
	var busy, longKey, empty, typo, ended *outcome[workflows.CallStatus]
	f.at(time.Second, func() {
		for i := range workflows.MaxOpenCalls {
			open = append(open, f.propose("close_ticket", fmt.Sprintf(`{"ticket_id":"T-%d"}`, i), ""))
		}
	})
	f.at(2*time.Second, func() {
		busy = f.propose("close_ticket", `{"ticket_id":"one-too-many"}`, "")
		longKey = f.propose("search_tickets", `{"query":"a"}`, string(make([]byte, workflows.MaxKeyBytes+1)))
		empty = f.propose(" ", `{}`, "")
		typo = sendUpdate[workflows.CallStatus](f, workflows.UpdatePropose, map[string]any{"tool": "search_tickets", "argz": map[string]string{}})
	})
	f.at(3*time.Second, func() {
		require.Equal(t, workflows.MaxOpenCalls, len(f.state().Interrupts))
		f.env.SignalWorkflow(workflows.SignalEnd, nil)
	})
	f.at(4*time.Second, func() {
		ended = f.propose("search_tickets", `{"query":"a"}`, "")
		for i := range workflows.MaxOpenCalls {
			f.reject(fmt.Sprintf("c-%d", i+1), "cleanup")
		}
	})
	res := f.run(external())
	require.Equal(t, workflows.StatusCompleted, res.Status)
	for _, o := range open {
		require.NoError(t, o.err)
	}
	require.Equal(t, workflows.RefusedBusy, failureType(t, busy.err))
	require.ErrorContains(t, busy.err, fmt.Sprintf("has %d calls open", workflows.MaxOpenCalls))
	require.ErrorContains(t, longKey.err, "the idempotency key has 201 bytes, at most 200")
	require.ErrorContains(t, empty.err, "tool is empty")
	require.ErrorContains(t, typo.err, "argz")
	require.ErrorContains(t, ended.err, "was ended")
	require.Zero(t, f.desk.count("close_ticket"))

	// A run of another planner takes no proposals.
	g := newFixture(t)
	var other *outcome[workflows.CallStatus]
	in := scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)))
	g.at(time.Second, func() {
		other = g.propose("search_tickets", `{"query":"a"}`, "")
		g.reject("c-1", "no")
	})
	require.Equal(t, workflows.StatusCompleted, g.run(in).Status)
	require.ErrorContains(t, other.err, `planner is "scripted"; only a run whose planner is "external" takes proposals`)
	require.Equal(t, workflows.RefusedInput, failureType(t, other.err))
}

// A call that waits when the run continues as new parks: the next run
// takes it up with its call id, the call query still answers for it, and
// once approved it runs once.
func TestExternalWaitingCallContinuesAsNew(t *testing.T) {
	f := newFixture(t)
	var p *outcome[workflows.CallStatus]
	res, inputs := runToEnd(t, f, external(), func(run int, f *fixture) {
		switch run {
		case 0:
			f.at(time.Second, func() { p = f.propose("close_ticket", `{"ticket_id":"TKT-3"}`, "k") })
			f.at(2*time.Second, func() {
				f.env.SetContinueAsNewSuggested(true)
				f.env.SignalWorkflow(workflows.SignalMessage, workflows.MessageInput{Text: "wake up"}) // refused: not a session; wakes the run
			})
		case 1:
			f.at(time.Second, func() {
				st := f.call("c-1")
				require.False(t, st.Done)
				require.NotNil(t, st.Waiting, "the parked call waits in the next run")
				f.approve("c-1")
			})
			f.at(2*time.Second, func() {
				st := f.call("c-1")
				require.True(t, st.Done)
				require.Equal(t, workflows.TraceOK, st.Status)
				f.env.SignalWorkflow(workflows.SignalEnd, nil)
			})
		}
	})
	require.Len(t, inputs, 2, "continued as new once")
	carried := inputs[1].Carry
	require.Len(t, carried.Parked, 1)
	require.Equal(t, "c-1", carried.Parked[0].Wait.CallID)
	require.Len(t, carried.External, 1)
	require.Equal(t, "k", carried.External[0].Key)
	require.NoError(t, p.err)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, 1, f.desk.closed["TKT-3"])
	require.Equal(t, []string{"c-1:close_ticket:blocked", "c-1:close_ticket:approved", "c-1:close_ticket:ok"}, statuses(res.Trace))
}

// A run continues as new after maxProposals proposals, even when Temporal
// does not suggest it (it refuses updates past 2,000 a run): the waiting
// call parks and goes on in the next run.
func TestExternalContinuesAsNewAfterManyProposals(t *testing.T) {
	f := newFixture(t)
	res, inputs := runToEnd(t, f, external(), func(run int, f *fixture) {
		switch run {
		case 0:
			f.at(time.Second, func() {
				f.propose("close_ticket", `{"ticket_id":"TKT-3"}`, "")
				for range 999 {
					f.propose("search_tickets", `{"query":"login"}`, "")
				}
			})
		case 1:
			f.at(time.Second, func() { f.approve("c-1") })
			f.at(2*time.Second, func() { f.env.SignalWorkflow(workflows.SignalEnd, nil) })
		}
	})
	require.Len(t, inputs, 2, "continued as new once")
	require.Len(t, inputs[1].Carry.Parked, 1)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, 1, f.desk.closed["TKT-3"])
	require.Equal(t, 1, f.desk.count("search_tickets"))
}

// A call whose fallback waits for a human waits as the call proposed: the
// update answers with the fallback's question.
func TestExternalFallbackWaitsForItsCall(t *testing.T) {
	f := newFixture(t, func(o *worker.Options) {
		o.Tools = append(o.Tools, tool.New(tool.Spec{Name: "quick_refund", Fallback: "refund", Retry: tool.RetryPolicy{MaxAttempts: 1}},
			func(ctx context.Context, a refundArgs) (string, error) {
				return "", errors.New("quick refunds are down")
			}))
	})
	var p *outcome[workflows.CallStatus]
	f.at(time.Second, func() { p = f.propose("quick_refund", `{"booking_id":"B-1","amount_cents":500}`, "") })
	f.at(2*time.Second, func() {
		require.True(t, p.done, "answered once the fallback waits")
		require.NoError(t, p.err)
		require.Equal(t, "c-1", p.result.CallID)
		require.NotNil(t, p.result.Waiting)
		require.Equal(t, "c-2", p.result.Waiting.CallID)
		require.Equal(t, "refund", p.result.Waiting.Tool)
		f.approve("c-2")
	})
	f.at(3*time.Second, func() {
		st := f.call("c-1")
		require.True(t, st.Done)
		require.Equal(t, workflows.TraceOK, st.Status)
		f.env.SignalWorkflow(workflows.SignalEnd, nil)
	})
	require.Equal(t, workflows.StatusCompleted, f.run(external()).Status)
	require.Len(t, f.desk.payments, 1)
}
