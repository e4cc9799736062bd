package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// A run that waits for a human continues as new when its history grows
// (issue 20, item 6), carrying its waiting calls: a call at the gate, a
// fallback at the gate, and a tool's own question each go on in the next run
// from where they stood, with the same call ids and questions, and each acts
// once when decided.
func TestWaitingRunContinuesAsNew(t *testing.T) {
	f := newFixture(t)
	in := scripted(steps(
		call("close_ticket", `{"ticket_id":"TKT-3"}`),
		call("carrier_cancel", `{"order_id":"O-1"}`), // fails; its fallback cancel_order (c-5) waits at the gate
		call("book_hotel", `{"guest":"Robert'); DROP TABLE bookings;--"}`),
		call("search_tickets", `{"query":"login"}`),
	))
	in.Planner.Kind = plan.KindSupport // the recording planner: it keeps what it was told
	var before workflows.State
	var edit *updateOutcome
	var activities []string
	res, inputs := runToEnd(t, f, in, func(run int, f *fixture) {
		f.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
			if run == 1 {
				activities = append(activities, info.ActivityID)
			}
		})
		switch run {
		case 0:
			f.at(time.Minute, func() {
				f.approve("c-3") // the gate; the tool then asks its own question
				f.env.SignalWorkflow(workflows.SignalApprove, json.RawMessage(`{"call_id":"c-1","args_digset":"x"}`))
			})
			f.at(2*time.Minute, func() {
				before = f.state()
				require.Len(t, before.Interrupts, 3)
				require.Len(t, before.Refused, 1)
				// Temporal suggests continuing as new (refused signals of any
				// size would grow the history): the next signal wakes the run.
				// (The test environment drops a signal that comes with the
				// switch; a real server replays the task with it.)
				f.env.SetContinueAsNewSuggested(true)
				f.env.SignalWorkflow(workflows.SignalEnd, nil)
			})
		case 1:
			f.at(time.Minute, func() {
				st := f.state()
				require.Equal(t, workflows.StatusWaitingForApproval, st.Status)
				require.Equal(t, before.Interrupts, st.Interrupts, "the same calls wait on the same questions")
				require.Equal(t, before.Refused, st.Refused, "refused signals are carried too")
				edit = f.update(signed.ActionApprove, workflows.DecisionInput{CallID: "c-1", Approver: "alice", ArgsDigest: f.digest("c-1"),
					EditedArgs: json.RawMessage(`{"ticket_id":"TKT-4"}`)})
				f.approve("c-5")
				f.approveInterrupt("c-3")
			})
		}
	})
	require.Len(t, inputs, 2, "one continue-as-new, while the calls waited")
	parked := inputs[1].Carry.Parked
	require.Len(t, parked, 3)
	byCall := map[string]workflows.ParkedCall{}
	for _, pc := range parked {
		byCall[pc.Wait.CallID] = pc
	}
	require.Zero(t, byCall["c-1"].Round)
	require.Equal(t, 1, byCall["c-5"].Depth)
	require.Equal(t, "carrier_cancel", byCall["c-5"].FallbackOf[0].Call.Tool)
	require.Equal(t, 1, byCall["c-3"].Round, "book_hotel's first run asked")
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.NoError(t, edit.err)
	require.Equal(t, 1, f.desk.closed["TKT-4"], "closed once, as edited")
	require.Contains(t, activities, "c-3#2", "book_hotel's second round, after its question was answered")
	require.Equal(t, 1, f.desk.count("cancel_order"))
	require.Len(t, f.desk.bookings, 1)
	require.Equal(t, 1, f.desk.count("search_tickets"))
	var last []string
	for _, rec := range res.Trace {
		last = append(last, rec.CallID+" "+rec.Status)
	}
	require.Subset(t, last, []string{"c-1 blocked", "c-1 edited", "c-1 ok", "c-5 blocked", "c-5 approved", "c-5 ok",
		"c-3 interrupted", "c-3 approved", "c-3 ok", "c-4 ok"})
	// The planner was told every outcome of the step, the parked ones too.
	told := map[string]plan.Entry{}
	for _, e := range f.desk.requests[len(f.desk.requests)-1].Transcript {
		if e.Role == plan.RoleTool {
			told[e.CallID] = e
		}
	}
	require.Equal(t, workflows.TraceOK, told["c-4"].Status, "the read that finished before the switch")
	require.Equal(t, workflows.TraceOK, told["c-3"].Status)
	require.Contains(t, told["c-1"].Note, `it ran with {"ticket_id":"TKT-4"} instead of the proposed {"ticket_id":"TKT-3"}`)
	require.Contains(t, told["c-2"].Error, "carrier_cancel failed after 2 attempts (carrier API unavailable); answered by fallback cancel_order (c-5)")
}

// A deny-policy step that stopped at a blocked call while a read waited for
// its human still ends blocked once the read is decided in the next run.
func TestParkedStepKeepsItsBlockedCall(t *testing.T) {
	f := newFixture(t)
	in := scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`), call("ask_read", `{"query":"x"}`)))
	in.Approval = workflows.PolicyDeny
	res, inputs := runToEnd(t, f, in, func(run int, f *fixture) {
		switch run {
		case 0:
			f.at(time.Minute, func() {
				f.env.SetContinueAsNewSuggested(true)
				f.env.SignalWorkflow(workflows.SignalEnd, nil)
			})
		case 1:
			f.at(time.Minute, func() { f.approveInterrupt("c-2") })
		}
	})
	require.Len(t, inputs, 2)
	require.Equal(t, workflows.StatusBlocked, res.Status)
	require.Equal(t, "c-1", res.BlockedOn.CallID)
	require.Equal(t, 2, f.desk.count("ask_read"), "asked, then read")
}

// A quorum half met goes on in the next run: bob's approval is carried, his
// token cannot be sent again, and carol's completes it.
func TestParkedQuorumIsCarried(t *testing.T) {
	s := newSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	var sent *workflows.DecisionInput
	var replay, carol *updateOutcome
	res, inputs := runToEnd(t, f, scripted(steps(refundCall(60000, ""))), func(run int, f *fixture) {
		switch run {
		case 0:
			f.at(time.Minute, func() {
				s.decide(f, "bob", signed.ActionApprove, "c-1", func(_ *signed.Claims, in *workflows.DecisionInput) { sent = in })
			})
			f.at(2*time.Minute, func() {
				f.env.SetContinueAsNewSuggested(true)
				f.env.SignalWorkflow(workflows.SignalApprove, json.RawMessage(`{}`))
			})
		case 1:
			f.at(time.Minute, func() {
				it := f.state().Interrupts[0]
				require.Equal(t, []string{"bob"}, it.ApprovedBy)
				replay = f.update(signed.ActionApprove, *sent)
				carol = s.decide(f, "carol", signed.ActionApprove, "c-1", nil)
			})
		}
	})
	require.Len(t, inputs, 2)
	require.ErrorContains(t, replay.err, "bob's token was taken already")
	require.NoError(t, carol.err)
	require.Equal(t, workflows.TraceApproved, carol.result.Decision)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Len(t, f.desk.payments, 1)
}

// A run's history_limit parks waiting calls only once the history has grown
// since the run started, so a limit below a run's own start cannot make it
// continue as new in a loop; once it has grown, it parks.
func TestParkingByHistoryLimit(t *testing.T) {
	f := newFixture(t)
	in := scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)))
	in.HistoryLimit = 10
	var runs int
	res, _ := runToEnd(t, f, in, func(run int, f *fixture) {
		runs++
		f.env.SetCurrentHistoryLength(50) // over the limit from the start
		switch run {
		case 0:
			f.at(time.Minute, func() {
				f.env.SignalWorkflow(workflows.SignalEnd, nil) // wakes the run: 50 events, not grown enough
			})
			f.at(2*time.Minute, func() {
				require.Equal(t, workflows.StatusWaitingForApproval, f.state().Status, "still waiting in the first run")
				f.env.SetCurrentHistoryLength(50 + 100)
				f.env.SignalWorkflow(workflows.SignalEnd, nil)
			})
		case 1:
			f.at(time.Minute, func() {
				f.env.SignalWorkflow(workflows.SignalEnd, nil)
			})
			f.at(2*time.Minute, func() { f.approve("c-1") })
		}
	})
	require.Equal(t, 2, runs, "parked once, when the history had grown by 100 events")
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, 1, f.desk.closed["TKT-3"])
}

// A step's calls carry at most MaxStepArgsBytes of arguments in all, and the
// calls waiting at once at most MaxWaitingBytes with their edits: a quorum
// approver editing every waiting call into 16 KiB of arguments is refused
// past the bound, and the run goes on.
func TestWaitingCallsAreBounded(t *testing.T) {
	s := newSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	var calls []tool.Proposal
	for range 20 { // 20 × ~15 KiB: the last ones are past MaxStepArgsBytes
		calls = append(calls, refundCall(60000, `,"memo":"`+strings.Repeat("m", 15<<10)+`"`))
	}
	small := make([]tool.Proposal, 40)
	for i := range small {
		small[i] = refundCall(60000+i, "")
	}
	var refused int
	f.at(time.Minute, func() {
		st := f.state()
		require.Len(t, st.Interrupts, 17, "256 KiB of arguments in all: 17 calls of 15 KiB")
		for _, it := range st.Interrupts {
			s.decide(f, "bob", signed.ActionReject, it.CallID, nil)
		}
	})
	f.at(2*time.Minute, func() {
		edits := map[string]*updateOutcome{}
		for _, it := range f.state().Interrupts {
			args := fmt.Sprintf(`{"booking_id":"BK-1","amount_cents":60001,"memo":%q}`, strings.Repeat("e", 15<<10)+it.CallID)
			edits[it.CallID] = s.decide(f, "bob", signed.ActionApprove, it.CallID, func(c *signed.Claims, in *workflows.DecisionInput) {
				in.EditedArgs = []byte(args)
				c.EditedDigest, _ = tool.Digest("refund", []byte(args))
			})
		}
		f.at(3*time.Minute, func() {
			for _, e := range edits {
				if e.err != nil {
					require.ErrorContains(t, e.err, "edited_args refused: the calls waiting now would hold more than 524288 bytes")
					refused++
				}
			}
			for _, it := range f.state().Interrupts {
				s.decide(f, "carol", signed.ActionReject, it.CallID, nil)
			}
		})
	})
	res := f.run(scripted(calls, small))
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Greater(t, refused, 0, "some edits were past the bound")
	require.Less(t, refused, 40, "the edits within it were taken")
	require.Empty(t, f.desk.payments)
}

// A continued run's parked calls are pending from its first workflow task,
// before its policy is loaded: a decision that arrives then waits for it and
// is held to it (an unsigned approval is refused, never taken as one
// without a policy).
func TestParkedCallsWaitForThePolicy(t *testing.T) {
	s := newSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	var digest string
	var early *updateOutcome
	res, _ := runToEnd(t, f, scripted(steps(refundCall(9000, ""))), func(run int, f *fixture) {
		switch run {
		case 0:
			f.at(time.Minute, func() {
				digest = f.digest("c-1")
				f.env.SetContinueAsNewSuggested(true)
				f.env.SignalWorkflow(workflows.SignalEnd, nil)
			})
		case 1:
			f.at(0, func() {
				f.env.SignalWorkflow(workflows.SignalApprove, workflows.DecisionInput{CallID: "c-1", Approver: "mallory", ArgsDigest: digest})
				early = f.update(signed.ActionApprove, workflows.DecisionInput{CallID: "c-1", Approver: "mallory", ArgsDigest: digest})
			})
			f.at(time.Minute, func() {
				st := f.state()
				require.Equal(t, workflows.StatusWaitingForApproval, st.Status, "the unsigned approval did not count")
				require.Contains(t, st.Refused[len(st.Refused)-1].Error, "unsigned")
				s.decide(f, "carol", signed.ActionReject, "c-1", nil)
			})
		}
	})
	require.Error(t, early.err)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Empty(t, f.desk.payments)
}

// An answer to a tool's question counts against MaxWaitingBytes too: a
// quorum answering every waiting question with 16 KiB is refused past it.
func TestWaitingAnswersAreBounded(t *testing.T) {
	s := newSigners(t)
	s.policy.Tools["book_hotel"] = policy.Tool{Approvers: &policy.Approvers{Roles: []string{"finance"}, Count: 2}}
	f := newFixture(t, withPolicy(s.policy))
	var calls []tool.Proposal
	for i := range 40 {
		calls = append(calls, call("book_hotel", fmt.Sprintf(`{"guest":"guest %d';"}`, i)))
	}
	gate := func(name string) func() {
		return func() {
			for _, it := range f.state().Interrupts {
				s.decide(f, name, signed.ActionApprove, it.CallID, nil)
			}
		}
	}
	var answers []*updateOutcome
	f.at(time.Minute, gate("bob"))
	f.at(2*time.Minute, gate("carol")) // every gate passes; each run of book_hotel asks its question
	f.at(3*time.Minute, func() {
		st := f.state()
		require.Len(t, st.Interrupts, 40)
		for _, it := range st.Interrupts {
			data := fmt.Sprintf(`{"note":%q}`, strings.Repeat("d", 15<<10)+it.CallID)
			answers = append(answers, s.decide(f, "bob", signed.ActionApprove, it.CallID, func(c *signed.Claims, in *workflows.DecisionInput) {
				in.Kind, c.Kind = workflows.KindInterrupt, string(workflows.KindInterrupt)
				in.Data = []byte(data)
				canon, _ := tool.Canonical([]byte(data))
				c.DataDigest = sha256Hex(string(canon))
			}))
		}
	})
	var refused int
	f.at(4*time.Minute, func() {
		for _, a := range answers {
			if a.err != nil {
				require.ErrorContains(t, a.err, "data refused: the calls waiting now would hold more than 524288 bytes")
				refused++
			}
		}
		for _, it := range f.state().Interrupts {
			s.decide(f, "carol", signed.ActionReject, it.CallID, nil)
		}
	})
	f.run(scripted(calls))
	require.Greater(t, refused, 0, "some answers were past the bound")
	require.Less(t, refused, 40, "the answers within it were taken")
	require.Empty(t, f.desk.bookings)
}
