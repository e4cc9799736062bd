package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// lastOutcome is what the planner was last told of callID.
func lastOutcome(t *testing.T, f *fixture, callID string) plan.Entry {
	t.Helper()
	require.NotEmpty(t, f.desk.requests)
	tr := f.desk.requests[len(f.desk.requests)-1].Transcript
	for i := len(tr) - 1; i >= 0; i-- {
		if tr[i].Role == plan.RoleTool && tr[i].CallID == callID {
			return tr[i]
		}
	}
	t.Fatalf("the planner was told nothing of %s", callID)
	return plan.Entry{}
}

// A human answers a read that asked for one in the tool's place: the tool
// does not run again, and the planner gets the answer marked as a human's.
func TestRespondAnswersInTheToolsPlace(t *testing.T) {
	f := newFixture(t)
	var res *updateOutcome
	f.at(time.Minute, func() {
		res = f.update(workflows.UpdateRespond, workflows.DecisionInput{CallID: "c-1", Approver: "alice", Kind: workflows.KindInterrupt,
			ArgsDigest: f.digest("c-1"), Response: []byte(`{"rows": ["redacted"]}`), Note: "read it myself"})
	})
	in := scripted(steps(call("ask_read", `{"query":"x"}`)))
	in.Planner.Kind = plan.KindSupport
	out := f.run(in)
	require.NoError(t, res.err)
	require.Equal(t, workflows.TraceResponded, res.result.Decision)
	require.Equal(t, 1, f.desk.count("ask_read"), "asked once, never run with the answer")
	require.Equal(t, []string{"c-1:ask_read:interrupted", "c-1:ask_read:responded"}, statuses(out.Trace))
	rec := out.Trace[1]
	require.Equal(t, "alice", rec.Approver)
	require.JSONEq(t, `{"rows":["redacted"]}`, string(rec.Result))
	told := lastOutcome(t, f, "c-1")
	require.Equal(t, workflows.TraceResponded, told.Status)
	require.JSONEq(t, `{"rows":["redacted"]}`, string(told.Result))
	require.Equal(t, "not executed: alice answered in the tool's place (read it myself)", told.Note)
}

// A destructive call is never answered in its place — that would report a
// side effect that never happened — unless a policy rule allows it; the
// refusal says why and the call still waits.
func TestRespondRefusedForADestructiveTool(t *testing.T) {
	f := newFixture(t)
	var respond, mixed *updateOutcome
	f.at(time.Minute, func() {
		respond = f.update(workflows.UpdateRespond, workflows.DecisionInput{CallID: "c-1", Approver: "mallory",
			ArgsDigest: f.digest("c-1"), Response: []byte(`{"closed":true}`)})
		mixed = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-1", Approver: "mallory",
			ArgsDigest: f.digest("c-1"), Response: []byte(`{"closed":true}`)})
	})
	f.at(2*time.Minute, func() {
		require.Equal(t, []string{"gate:close_ticket"}, f.next(), "still waiting")
		f.approve("c-1")
	})
	out := f.run(scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`))))
	require.ErrorContains(t, respond.err, "respond refused: close_ticket is destructive")
	require.ErrorContains(t, mixed.err, "response goes with the respond update")
	require.Equal(t, 1, f.desk.count("close_ticket"))
	require.Equal(t, []string{"c-1:close_ticket:blocked", "c-1:close_ticket:approved", "c-1:close_ticket:ok"}, statuses(out.Trace))
}

// A cancellation is a rejection the trace and the planner call by its name.
func TestCancelIsItsOwnOutcome(t *testing.T) {
	f := newFixture(t)
	var res, approveCancel *updateOutcome
	f.at(time.Minute, func() {
		approveCancel = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-1", Approver: "alice", ArgsDigest: f.digest("c-1"), Cancel: true})
		res = f.update(workflows.UpdateReject, workflows.DecisionInput{CallID: "c-1", Approver: "alice", ArgsDigest: f.digest("c-1"), Cancel: true, Reason: "the user closed the chat"})
	})
	in := scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)))
	in.Planner.Kind = plan.KindSupport
	out := f.run(in)
	require.ErrorContains(t, approveCancel.err, "cancel goes with the reject update")
	require.NoError(t, res.err)
	require.Equal(t, workflows.TraceCancelled, res.result.Decision)
	require.Zero(t, f.desk.count("close_ticket"))
	require.Equal(t, []string{"c-1:close_ticket:blocked", "c-1:close_ticket:cancelled"}, statuses(out.Trace))
	told := lastOutcome(t, f, "c-1")
	require.Equal(t, workflows.TraceCancelled, told.Status)
	require.Equal(t, "not executed: cancelled by alice: the user closed the chat", told.Error)
}

// An expiry tells the planner the call was not executed, and why.
func TestExpiryIsSaidAsNotExecuted(t *testing.T) {
	f := newFixture(t)
	in := scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)))
	in.Planner.Kind = plan.KindSupport
	in.ApprovalTimeout = workflows.Duration(time.Hour)
	f.run(in)
	told := lastOutcome(t, f, "c-1")
	require.Equal(t, workflows.TraceExpired, told.Status)
	require.Equal(t, "not executed: no decision within 1h0m0s: treated as rejected", told.Error)
}

// Under a policy, a rule may let an approver answer a destructive call in
// its place; the response is signed (action respond, data_digest), and one
// signed for another response is refused.
func TestPolicyRuleAllowsRespond(t *testing.T) {
	s := newSigners(t)
	s.policy.Tools["close_ticket"] = policy.Tool{Rules: []policy.Rule{{ID: "answer-closes", When: "true", Decide: policy.Ask,
		Approvers: &policy.Approvers{Roles: []string{"support"}}, Respond: true}}}
	f := newFixture(t, withPolicy(s.policy))
	response := `{"closed":false,"note":"handled by phone"}`
	respondWith := func(signedResponse string) func(*signed.Claims, *workflows.DecisionInput) {
		return func(c *signed.Claims, in *workflows.DecisionInput) {
			c.Note = ""
			in.Response = []byte(response)
			canon, _ := tool.Canonical([]byte(signedResponse))
			c.DataDigest = sha256Hex(string(canon))
		}
	}
	var wrongDigest, asApproval, good, cancel *updateOutcome
	f.at(time.Minute, func() {
		cancel = s.decide(f, "alice", signed.ActionReject, "c-2", func(c *signed.Claims, in *workflows.DecisionInput) { in.Cancel = true })
		wrongDigest = s.decide(f, "alice", signed.ActionRespond, "c-1", respondWith(`{"closed":true}`))
		asApproval = s.decide(f, "alice", signed.ActionApprove, "c-1", func(c *signed.Claims, in *workflows.DecisionInput) {
			in.Response = []byte(response)
		})
	})
	f.at(2*time.Minute, func() { good = s.decide(f, "alice", signed.ActionRespond, "c-1", respondWith(response)) })
	out := f.run(scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`), call("close_ticket", `{"ticket_id":"TKT-4"}`))))
	require.NoError(t, cancel.err)
	require.Equal(t, workflows.TraceCancelled, cancel.result.Decision, "a signed rejection cancels too")
	require.ErrorContains(t, wrongDigest.err, "signs a response with digest")
	require.ErrorContains(t, asApproval.err, "response goes with the respond update")
	require.NoError(t, good.err)
	require.Zero(t, f.desk.count("close_ticket"), "answered in its place: never run")
	require.ElementsMatch(t, []string{"c-1:close_ticket:blocked", "c-2:close_ticket:blocked", "c-2:close_ticket:cancelled", "c-1:close_ticket:responded"}, statuses(out.Trace))
	for _, rec := range out.Trace {
		require.Equal(t, "answer-closes", rec.Rule)
	}
}
