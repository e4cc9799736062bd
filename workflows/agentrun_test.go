package workflows_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// The seed's walk-through: search twice (one activity, one cache hit), then
// the close is blocked at the gate until a human approves that exact call.
func TestSeedWalkThrough(t *testing.T) {
	f := newFixture(t)
	f.at(time.Minute, func() {
		require.Equal(t, []string{"gate:close_ticket"}, f.next())
		s := f.state()
		require.Equal(t, workflows.StatusWaitingForApproval, s.Status)
		require.Len(t, s.Interrupts, 1)
		require.Equal(t, "c-3", s.Interrupts[0].CallID)
		require.JSONEq(t, `{"ticket_id":"TKT-3"}`, string(s.Interrupts[0].CallArgs))
		digest, err := tool.Digest("close_ticket", json.RawMessage(`{"ticket_id":"TKT-3"}`))
		require.NoError(t, err)
		require.Equal(t, digest, s.Interrupts[0].ArgsDigest)
		require.Equal(t, 0, f.desk.count("close_ticket"), "nothing closed before the approval")
		f.approve("c-3")
	})
	res := f.run(scripted(
		steps(call("search_tickets", `{"query":"login"}`)),
		steps(call("search_tickets", `{"query":"login"}`)),
		steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)),
	))
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, "done", res.Answer)
	require.Equal(t, 1, f.desk.count("search_tickets"))
	require.Equal(t, 1, f.desk.count("close_ticket"))
	require.Equal(t, []string{
		"c-1:search_tickets:ok", "c-2:search_tickets:cache_hit",
		"c-3:close_ticket:blocked", "c-3:close_ticket:approved", "c-3:close_ticket:ok",
	}, statuses(res.Trace))
	require.Equal(t, "alice", res.Trace[3].Approver)
	require.Equal(t, "alice", res.Trace[4].Approver)
	require.JSONEq(t, `{"id":"TKT-3","status":"closed"}`, string(res.Trace[4].Result))
	require.Equal(t, workflows.StatusCompleted, f.state().Status)
	require.Equal(t, []string{}, f.next())
}

func TestMemoKeyIgnoresArgumentOrder(t *testing.T) {
	f := newFixture(t)
	res := f.run(scripted(
		steps(call("search_tickets", `{"query":"auth","limit":5}`)),
		steps(call("search_tickets", `{"limit":5, "query":"auth"}`)),
		steps(call("search_tickets", `{"limit":5.0,"query":"auth"}`)),
	))
	require.Equal(t, 1, f.desk.count("search_tickets"))
	require.Equal(t, []string{"c-1:search_tickets:ok", "c-2:search_tickets:cache_hit", "c-3:search_tickets:cache_hit"}, statuses(res.Trace))
	require.Equal(t, int64(2), f.state().Memo.Hits)
}

// A destructive result is never stored in the memo: the same destructive
// call proposed again is blocked again and needs its own approval.
func TestDestructiveCallsAreNeverMemoized(t *testing.T) {
	f := newFixture(t)
	f.at(time.Minute, func() { f.approve("c-1") })
	f.at(2*time.Minute, func() {
		require.Equal(t, []string{"gate:close_ticket"}, f.next())
		require.Equal(t, "c-2", f.state().Interrupts[0].CallID)
		require.Equal(t, 1, f.desk.count("close_ticket"))
		f.approve("c-2")
	})
	res := f.run(scripted(
		steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)),
		steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)),
	))
	require.Equal(t, 2, f.desk.count("close_ticket"))
	require.Equal(t, []string{
		"c-1:close_ticket:blocked", "c-1:close_ticket:approved", "c-1:close_ticket:ok",
		"c-2:close_ticket:blocked", "c-2:close_ticket:approved", "c-2:close_ticket:ok",
	}, statuses(res.Trace))
	require.Zero(t, f.state().Memo.Entries)
}

// Approvals that do not fit the waiting call change nothing; as updates they
// are refused with a clear error; a duplicate approval is a no-op.
func TestBadAndDuplicateApprovalsChangeNothing(t *testing.T) {
	f := newFixture(t)
	var unknown, mismatch, good, duplicate *updateOutcome
	var digest string
	f.at(time.Minute, func() {
		f.approve("c-9")
		f.env.SignalWorkflow(workflows.SignalApprove, workflows.DecisionInput{CallID: "c-1", Approver: "mallory", ArgsDigest: "0000"})
		f.env.SignalWorkflow(workflows.SignalApprove, "not an object")
		unknown = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-7", Approver: "alice"})
		mismatch = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-1", Approver: "alice", ArgsDigest: "beef"})
	})
	f.at(2*time.Minute, func() {
		require.True(t, unknown.done && mismatch.done)
		require.ErrorContains(t, unknown.err, "call c-7 has not been proposed yet: this run's calls so far are c-1 … c-1")
		require.ErrorContains(t, mismatch.err, "does not match")
		s := f.state()
		require.Equal(t, workflows.StatusWaitingForApproval, s.Status, "bad approvals must not decide the call")
		require.Len(t, s.Refused, 3, "refused updates are not recorded: they never reach history")
		require.Contains(t, s.Refused[0].Error, "c-9 has not been proposed yet")
		require.Contains(t, s.Refused[1].Error, "does not match")
		require.Contains(t, s.Refused[2].Error, "payload")
		require.Equal(t, 0, f.desk.count("close_ticket"))
		digest = s.Interrupts[0].ArgsDigest
		good = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-1", Approver: "alice", ArgsDigest: digest})
	})
	f.at(3*time.Minute, func() {
		f.approve("c-1") // duplicate: the call is no longer waiting
		duplicate = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-1", Approver: "alice"})
	})
	f.at(4*time.Minute, func() { f.approve("c-2") })
	res := f.run(scripted(
		steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)),
		steps(call("close_ticket", `{"ticket_id":"TKT-4"}`)),
	))
	require.NoError(t, good.err)
	require.Equal(t, workflows.DecisionResult{CallID: "c-1", Tool: "close_ticket", Decision: "approved", Approver: "alice",
		ApprovedBy: []string{"alice"}, Needed: 1, ArgsDigest: digest}, good.result)
	require.True(t, duplicate.done)
	require.ErrorContains(t, duplicate.err, "not waiting for a decision")
	require.Equal(t, 2, f.desk.count("close_ticket"))
	require.Equal(t, map[string]int{"TKT-3": 1, "TKT-4": 1}, f.desk.closed)
	require.Len(t, f.state().Refused, 4)
	require.Equal(t, []string{
		"c-1:close_ticket:blocked", "c-1:close_ticket:approved", "c-1:close_ticket:ok",
		"c-2:close_ticket:blocked", "c-2:close_ticket:approved", "c-2:close_ticket:ok",
	}, statuses(res.Trace))
}

// A rejection skips the call and its reason reaches the planner.
func TestRejectionReasonReachesThePlanner(t *testing.T) {
	f := newFixture(t)
	f.at(time.Minute, func() { f.reject("c-1", "wrong ticket") })
	in := scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)))
	in.Planner.Kind = plan.KindSupport
	res := f.run(in)
	require.Equal(t, 0, f.desk.count("close_ticket"))
	require.Equal(t, []string{"c-1:close_ticket:blocked", "c-1:close_ticket:rejected"}, statuses(res.Trace))
	require.Equal(t, "bob", res.Trace[1].Approver)
	require.Equal(t, "wrong ticket", res.Trace[1].Reason)
	require.Len(t, f.desk.requests, 2)
	last := f.desk.requests[1].Transcript
	outcome := last[len(last)-1]
	require.Equal(t, plan.RoleTool, outcome.Role)
	require.Equal(t, "c-1", outcome.CallID)
	require.Equal(t, workflows.TraceRejected, outcome.Status)
	require.Contains(t, outcome.Error, "wrong ticket")
}

func TestApprovalExpiresAsRejection(t *testing.T) {
	f := newFixture(t)
	in := scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)))
	in.ApprovalTimeout = workflows.Duration(time.Hour)
	f.at(59*time.Minute, func() {
		s := f.state()
		require.Len(t, s.Interrupts, 1)
		require.Equal(t, time.Hour, s.Interrupts[0].ExpiresAt.Sub(s.Interrupts[0].RequestedAt))
	})
	res := f.run(in)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, 0, f.desk.count("close_ticket"))
	require.Equal(t, []string{"c-1:close_ticket:blocked", "c-1:close_ticket:expired"}, statuses(res.Trace))
	require.Equal(t, time.Hour, res.Trace[1].At.Sub(res.Trace[0].At), "expired exactly when approval_timeout ran out, in workflow time")
	require.Equal(t, "no decision within 1h0m0s: treated as rejected", res.Trace[1].Reason)
}

func TestDenyPolicyEndsBlocked(t *testing.T) {
	f := newFixture(t)
	in := scripted(
		steps(call("search_tickets", `{"query":"login"}`), call("close_ticket", `{"ticket_id":"TKT-3"}`)),
		steps(call("search_tickets", `{"query":"never"}`)),
	)
	in.Approval = workflows.PolicyDeny
	res := f.run(in)
	require.Equal(t, workflows.StatusBlocked, res.Status)
	require.Equal(t, &tool.ConfirmationRequired{CallID: "c-2", Tool: "close_ticket", CallArgs: json.RawMessage(`{"ticket_id":"TKT-3"}`)}, res.BlockedOn)
	require.Equal(t, 0, f.desk.count("close_ticket"))
	require.Equal(t, 1, f.desk.count("search_tickets"), "the parallel read completes; the next step never runs")
	require.Equal(t, workflows.StatusBlocked, f.state().Status)
}

func TestAlwaysApproveNeedsTheWorkersConsent(t *testing.T) {
	in := scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)))
	in.Approval = workflows.PolicyAlwaysApprove

	f := newFixture(t)
	f.env.ExecuteWorkflow(workflows.WorkflowName, in)
	require.ErrorContains(t, f.env.GetWorkflowError(), `approval "always_approve" refused: this worker was not started allowing it`)
	require.Equal(t, 0, f.desk.count("close_ticket"))

	f = newFixture(t, allowAutoApprove)
	res := f.run(in)
	require.Equal(t, 1, f.desk.count("close_ticket"))
	require.Equal(t, []string{"c-1:close_ticket:approved", "c-1:close_ticket:ok"}, statuses(res.Trace))
	require.Equal(t, "policy:always_approve", res.Trace[0].Approver)
}

// Unknown tools and arguments that break the schema go back to the planner as
// errors; the run goes on.
func TestBadCallsFromThePlannerAreErrorsNotCrashes(t *testing.T) {
	f := newFixture(t)
	res := f.run(scripted(
		steps(call("drop_database", `{}`), call("search_tickets", `{"limit":5}`), call("search_tickets", `[1,2]`), call("search_tickets", `"{\"query\":"`)),
		steps(call("search_tickets", `{"query":"login"}`)),
	))
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, []string{"c-1:drop_database:error", "c-2:search_tickets:error", "c-3:search_tickets:error", "c-4:search_tickets:error", "c-5:search_tickets:ok"}, statuses(res.Trace))
	require.Contains(t, res.Trace[0].Error, `no tool named "drop_database"`)
	require.Contains(t, res.Trace[1].Error, "query")
	require.Contains(t, res.Trace[2].Error, "must be a JSON object")
	require.Contains(t, res.Trace[3].Error, `arguments are not valid JSON: {"query":`)
	require.Equal(t, 1, f.desk.count("search_tickets"))
}

func TestRetriesThenFallback(t *testing.T) {
	f := newFixture(t)
	res := f.run(scripted(steps(call("carrier_status", `{"order_id":"O-1"}`))))
	require.Equal(t, 3, f.desk.count("carrier_status"))
	require.Equal(t, 1, f.desk.count("cached_status"))
	require.Equal(t, []string{"c-1:carrier_status:fallback", "c-2:cached_status:ok"}, statuses(res.Trace))
	require.Equal(t, int32(3), res.Trace[0].Attempts)
	require.Contains(t, res.Trace[0].Error, "carrier API unavailable")
	require.Contains(t, res.Trace[0].Reason, "cached_status as c-2")
}

func TestNonRetryableFailureDoesNotFallBack(t *testing.T) {
	f := newFixture(t)
	res := f.run(scripted(steps(call("strict_lookup", `{"order_id":"O-404"}`))))
	require.Equal(t, 1, f.desk.count("strict_lookup"))
	require.Equal(t, 0, f.desk.count("cached_status"))
	require.Equal(t, []string{"c-1:strict_lookup:error"}, statuses(res.Trace))
	require.Contains(t, res.Trace[0].Error, "O-404 does not exist")
	require.Equal(t, int32(1), res.Trace[0].Attempts)
}

// A tool that refuses to commit pauses the run like a gate block; on approval
// it runs again, sees the approval, and writes once.
func TestInterruptThenApprove(t *testing.T) {
	f := newFixture(t)
	f.at(time.Minute, func() { f.approve("c-1") }) // the gate
	f.at(2*time.Minute, func() {
		require.Equal(t, []string{"interrupt:book_hotel"}, f.next())
		s := f.state()
		require.Equal(t, workflows.StatusWaitingForApproval, s.Status)
		require.Contains(t, s.Interrupts[0].Reason, "SQL injection")
		require.Empty(t, f.desk.bookings, "nothing written before the approval")
		f.approve("c-1") // a duplicate of the gate's approval: must not answer the interrupt
	})
	f.at(3*time.Minute, func() {
		s := f.state()
		require.Equal(t, []string{"interrupt:book_hotel"}, f.next(), "still waiting")
		require.Len(t, s.Refused, 1)
		require.Contains(t, s.Refused[0].Error, `must say "kind":"interrupt"`)
		require.Empty(t, f.desk.bookings)
		f.approveInterrupt("c-1")
	})
	res := f.run(scripted(steps(call("book_hotel", `{"guest":"Robert'); DROP TABLE bookings;--"}`))))
	require.Equal(t, []string{
		"c-1:book_hotel:blocked", "c-1:book_hotel:approved",
		"c-1:book_hotel:interrupted", "c-1:book_hotel:approved", "c-1:book_hotel:ok",
	}, statuses(res.Trace))
	require.Len(t, f.desk.bookings, 1)
	require.Len(t, f.desk.approvals, 2)
	require.Equal(t, &tool.Approval{Approver: "alice", Kind: tool.ApprovedAtGate}, f.desk.approvals[0], "the first run sees the gate's approval")
	require.Equal(t, &tool.Approval{Approver: "alice", Kind: tool.ApprovedInterrupt}, f.desk.approvals[1], "the re-run sees the interrupt's approval")
}

func TestInterruptThenRejectWritesNothing(t *testing.T) {
	f := newFixture(t, allowAutoApprove)
	f.at(time.Minute, func() { f.rejectInterrupt("c-1", "suspicious guest") })
	in := scripted(steps(call("book_hotel", `{"guest":"x' OR 1=1"}`)))
	in.Approval = workflows.PolicyAlwaysApprove // the gate passes by policy; the tool's own check still asks a human
	res := f.run(in)
	require.Empty(t, f.desk.bookings)
	require.Equal(t, []string{"c-1:book_hotel:approved", "c-1:book_hotel:interrupted", "c-1:book_hotel:rejected"}, statuses(res.Trace))
}

// A refund whose activity fails after its side effect is retried with the
// same idempotency key and pays once; duplicate approvals pay nothing more.
func TestRefundPaysOnceAcrossRetriesAndDuplicateApprovals(t *testing.T) {
	f := newFixture(t)
	f.desk.failAfter["refund"] = 1
	f.at(time.Minute, func() { f.approve("c-1"); f.approve("c-1") })
	f.at(2*time.Minute, func() { f.approve("c-1"); f.reject("c-2", "not today") })
	res := f.run(scripted(
		steps(call("refund", `{"booking_id":"BK-1","amount_cents":500}`)),
		steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)),
	))
	require.Equal(t, 2, f.desk.count("refund"), "one failed attempt after the payment, one retry")
	require.Len(t, f.desk.payments, 1)
	require.Equal(t, []string{"c-1:refund:blocked", "c-1:refund:approved", "c-1:refund:ok", "c-2:close_ticket:blocked", "c-2:close_ticket:rejected"}, statuses(res.Trace))
	require.Equal(t, int32(2), res.Trace[2].Attempts)
	require.JSONEq(t, `{"payment_id":"P-1","booking_id":"BK-1","amount_cents":500}`, string(res.Trace[2].Result))
	require.Len(t, f.state().Refused, 2)
}

// A write invalidates the memo entries it declares: a read after it runs again.
func TestWriteInvalidatesStaleReads(t *testing.T) {
	f := newFixture(t)
	f.at(time.Minute, func() { f.approve("c-2") })
	res := f.run(scripted(
		steps(call("search_tickets", `{"query":"login"}`)),
		steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)),
		steps(call("search_tickets", `{"query":"login"}`)),
		steps(call("search_tickets", `{"query":"login"}`)),
	))
	require.Equal(t, 2, f.desk.count("search_tickets"))
	require.Equal(t, []string{
		"c-1:search_tickets:ok", "c-2:close_ticket:blocked", "c-2:close_ticket:approved", "c-2:close_ticket:ok",
		"c-3:search_tickets:ok", "c-4:search_tickets:cache_hit",
	}, statuses(res.Trace))
}

// Calls proposed together run concurrently: a pending approval holds back
// only its own call, and outcomes reach the planner in proposal order.
func TestParallelCallsWithOnePendingApproval(t *testing.T) {
	f := newFixture(t)
	f.at(time.Minute, func() {
		require.Equal(t, 1, f.desk.count("search_tickets"))
		require.Equal(t, 1, f.desk.count("cached_status"))
		require.Equal(t, []string{"gate:close_ticket"}, f.next())
		f.approve("c-2")
	})
	in := scripted(steps(
		call("search_tickets", `{"query":"login"}`),
		call("close_ticket", `{"ticket_id":"TKT-3"}`),
		call("cached_status", `{"order_id":"O-1"}`),
	))
	in.Planner.Kind = plan.KindSupport
	res := f.run(in)
	require.Equal(t, 1, f.desk.count("close_ticket"))
	last := f.desk.requests[len(f.desk.requests)-1].Transcript
	var order []string
	for _, e := range last {
		if e.Role == plan.RoleTool {
			order = append(order, e.CallID+":"+e.Status)
		}
	}
	require.Equal(t, []string{"c-1:ok", "c-2:ok", "c-3:ok"}, order)
	// The trace is in event order: the close finished last.
	require.Equal(t, "c-2:close_ticket:ok", statuses(res.Trace)[len(res.Trace)-1])
}

func TestLocalActivityToolsRunAndMemoize(t *testing.T) {
	f := newFixture(t)
	res := f.run(scripted(steps(call("fast_read", `{"query":"a"}`)), steps(call("fast_read", `{"query":"a"}`))))
	require.Equal(t, 1, f.desk.count("fast_read"))
	require.Equal(t, []string{"c-1:fast_read:ok", "c-2:fast_read:cache_hit"}, statuses(res.Trace))
	require.JSONEq(t, `"fast a"`, string(res.Trace[0].Result))
}

func TestPlannerThatNeverAnswersStopsAtMaxTurns(t *testing.T) {
	f := newFixture(t)
	var turns [][]tool.Proposal
	for i := 0; i < 5; i++ {
		turns = append(turns, steps(call("search_tickets", `{"query":"loop"}`)))
	}
	in := scripted(turns...)
	in.MaxTurns = 3
	res := f.run(in)
	require.Equal(t, workflows.StatusFailed, res.Status)
	require.Contains(t, res.Error, "max_turns (3 steps)")
	require.Len(t, res.Trace, 3)
}

// A decided call cancels its approval timer: nothing is left to fire (and
// wake the run, and grow its history) when the timeout would have passed.
func TestApprovalCancelsItsTimer(t *testing.T) {
	f := newFixture(t)
	var cancelled int
	f.env.SetOnTimerCanceledListener(func(timerID string) { cancelled++ })
	f.at(time.Minute, func() { f.approve("c-1") })
	res := f.run(scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`))))
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, 1, cancelled, "the approval timer was cancelled")
}
