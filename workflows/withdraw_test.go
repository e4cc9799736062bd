package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/workflows"
)

func (f *fixture) withdraw(callID, key, reason string) *outcome[workflows.CallStatus] {
	return sendUpdate[workflows.CallStatus](f, workflows.UpdateWithdraw, workflows.WithdrawInput{CallID: callID, Key: key, Reason: reason})
}

// A caller withdraws the call it proposed while it waits for a human: the
// call ends cancelled by (caller), never runs, and an approval that comes
// after is refused. A withdrawal under another key, of an unknown call, of
// a call that ran, or of a call approved is refused,
// saying why; the run goes on.
func TestWithdrawAWaitingCall(t *testing.T) {
	f := newFixture(t)
	const closeArgs = `{"ticket_id":"TKT-3"}`
	var wrongKey, unknown, withdrawn, again, ran, late *outcome[workflows.CallStatus]
	var lateApproval *updateOutcome
	f.at(time.Second, func() { f.propose("close_ticket", closeArgs, "k-1") })
	f.at(2*time.Second, func() {
		require.Equal(t, []string{"gate:close_ticket"}, f.next())
		wrongKey = f.withdraw("c-1", "k-2", "")
		unknown = f.withdraw("c-9", "k-1", "")
	})
	f.at(3*time.Second, func() {
		withdrawn = f.withdraw("c-1", "k-1", "the caller's operation was cancelled")
	})
	f.at(4*time.Second, func() {
		lateApproval = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-1", Approver: "alice", ArgsDigest: withdrawn.result.ArgsDigest})
		again = f.withdraw("c-1", "k-1", "")
		f.propose("search_tickets", `{"query":"login"}`, "k-3")
	})
	f.at(5*time.Second, func() { ran = f.withdraw("c-2", "k-3", "") })
	f.at(6*time.Second, func() { f.propose("close_ticket", `{"ticket_id":"TKT-4"}`, "k-4") })
	f.at(7*time.Second, func() { f.approve("c-3") })
	f.at(7*time.Second+time.Millisecond, func() { late = f.withdraw("c-3", "k-4", "") })
	f.at(8*time.Second, func() { f.env.SignalWorkflow(workflows.SignalEnd, nil) })
	res := f.run(external())
	require.Equal(t, workflows.StatusCompleted, res.Status)

	require.ErrorContains(t, wrongKey.err, "proposed under another idempotency key")
	require.Equal(t, workflows.RefusedInput, failureType(t, wrongKey.err))
	require.Equal(t, workflows.RefusedUnknownCall, failureType(t, unknown.err))

	require.NoError(t, withdrawn.err)
	require.True(t, withdrawn.result.Done)
	require.Equal(t, workflows.TraceCancelled, withdrawn.result.Status)
	require.Equal(t, "not executed: cancelled by (caller): withdrawn by its caller: the caller's operation was cancelled", withdrawn.result.Error)
	require.Equal(t, workflows.RefusedNotWaiting, failureType(t, lateApproval.err), "an approval after the withdrawal")
	require.Equal(t, workflows.RefusedNotWaiting, failureType(t, again.err))
	require.ErrorContains(t, again.err, "has already ended cancelled")
	require.Equal(t, workflows.RefusedNotWaiting, failureType(t, ran.err))
	require.Equal(t, workflows.RefusedNotWaiting, failureType(t, late.err), "approved: it ran, and is not withdrawn")

	require.Zero(t, f.desk.closed["TKT-3"], "the withdrawn close never ran")
	require.Equal(t, 1, f.desk.closed["TKT-4"])
	require.Equal(t, []string{"c-1:close_ticket:blocked", "c-1:close_ticket:cancelled", "c-2:search_tickets:ok",
		"c-3:close_ticket:blocked", "c-3:close_ticket:approved", "c-3:close_ticket:ok"}, statuses(res.Trace))
	for _, r := range res.Trace {
		if r.CallID == "c-1" && r.Status == workflows.TraceCancelled {
			require.Equal(t, workflows.WithdrawnBy, r.Approver)
		}
	}
}

// Only a call proposed to an external planner's run is withdrawn.
func TestWithdrawRefusedForAScriptedRun(t *testing.T) {
	f := newFixture(t)
	var w *outcome[workflows.CallStatus]
	f.at(time.Second, func() {
		w = f.withdraw("c-1", "", "")
		f.approve("c-1")
	})
	res := f.run(scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`))))
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.ErrorContains(t, w.err, `only a call proposed to a run whose planner is "external"`)
}
