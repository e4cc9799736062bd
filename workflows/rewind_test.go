package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// operatorPolicy is the test policy with finance as the operators' role.
func operatorPolicy(s *signers) *signers {
	p := *s.policy
	p.Operators = []string{"finance"}
	s.policy = &p
	return s
}

// checkRewind asks the run whether it would take note.
func (f *fixture) checkRewind(note workflows.RewindNote) (string, error) {
	v, err := f.env.QueryWorkflow(workflows.QueryCheckRewind, note)
	if err != nil {
		return "", err
	}
	var by string
	require.NoError(f.t, v.Get(&by))
	return by, nil
}

// Under a policy the run takes a rewind only from an operator's token bound
// to this run, the call, the run reset and the preview; the check before
// the reset says why it would not; and a note sent to a run that was not
// reset is refused.
func TestARewindIsAnOperatorsSignedAct(t *testing.T) {
	s := operatorPolicy(newSigners(t))
	f := newFixture(t, withPolicy(s.policy))
	preview, reset := strings.Repeat("ab", 32), strings.Repeat("0f", 16)
	note := func(who string, c signed.Claims) workflows.RewindNote {
		n := workflows.RewindNote{CallID: "c-1", Tool: "close_ticket", Step: 1, BaseRunID: "run-1", Event: 4, Preview: preview, By: who, Reset: reset}
		if who != "" {
			if c.Action == "" {
				c.Action = signed.ActionRewind
			}
			if c.CallID == "" {
				c.CallID, c.Source, c.Preview, c.Reset = n.CallID, n.BaseRunID, n.Preview, n.Reset
			}
			n.Token = s.token(f, who, c)
		}
		return n
	}
	f.at(time.Minute, func() {
		by, err := f.checkRewind(note("bob", signed.Claims{}))
		require.NoError(t, err)
		require.Equal(t, "bob", by)
		for _, tc := range []struct {
			note workflows.RewindNote
			want string
		}{
			{note("alice", signed.Claims{}), "alice holds [support]; rewinding or forking a run needs one of the operators' roles [finance]"},
			{note("bob", signed.Claims{CallID: "c-1", Source: "run-1", Preview: strings.Repeat("cd", 32), Reset: reset}), "bob's token signs a rewind of run run-1 to c-1 from preview cdcdcdcdcdcdcdcd, not this one"},
			{note("bob", signed.Claims{CallID: "c-2", Source: "run-1", Preview: preview, Reset: reset}), "to c-2"},
			{note("bob", signed.Claims{CallID: "c-1", Source: "run-0", Preview: preview, Reset: reset}), "of run run-0"},
			{note("bob", signed.Claims{CallID: "c-1", Source: "run-1", Preview: preview, Reset: strings.Repeat("1e", 16)}),
				`bob's token signs the rewind of reset "1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e", not this note's ("0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f")`},
			{note("bob", signed.Claims{CallID: "c-1", Source: "run-1", Preview: preview}), `signs the rewind of reset ""`},
			{workflows.RewindNote{CallID: "c-1", BaseRunID: "run-1", Preview: preview}, "reset must name the reset it comes with"},
			{note("bob", signed.Claims{Action: signed.ActionApprove}), `signs "approve", not "rewind"`},
			{note("bob", signed.Claims{WorkflowID: "another-run"}), `is for run "another-run"`},
			{note("", signed.Claims{}), "unsigned"},
			{workflows.RewindNote{CallID: "3", BaseRunID: "run-1", Preview: preview, Reset: reset}, `call_id "3"`},
			{workflows.RewindNote{CallID: "c-1", BaseRunID: "run-1", Preview: "short", Reset: reset}, "64 hex digits"},
		} {
			_, err := f.checkRewind(tc.note)
			require.ErrorContains(t, err, tc.want)
		}
		// This run was never reset: the note itself is refused, and kept.
		f.env.SignalWorkflow(workflows.SignalRewound, note("bob", signed.Claims{}))
	})
	f.at(2*time.Minute, func() {
		st := f.state()
		require.Len(t, st.Refused, 1)
		require.Contains(t, st.Refused[0].Error, "this run's history holds no reset at event 4")
		f.signedReject(s, "alice", "c-1", "no")
	})
	f.env.OnActivity(workflows.ResetActivity, mock.Anything, mock.Anything).Return(workflows.ResetEvent{}, nil) // never reset
	res := f.run(scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`))))
	for _, rec := range res.Trace {
		require.NotEqual(t, workflows.TraceRewound, rec.Status, "a refused note is not recorded")
	}
}

// A rewind note is taken only in the run its own reset made (rules version
// 9): the reset at the note's event must be of the note's base run, have
// made this run, and name the note's reset in its reason; from rules
// version 14, a worker's record of that reset into this run must be in the
// authority namespace (a copied reason is not enough). The first note that
// fits is taken, and no second one.
func TestARewindNoteFitsItsReset(t *testing.T) {
	s := operatorPolicy(newSigners(t))
	f := newFixture(t, withPolicy(s.policy))
	reset := strings.Repeat("0f", 16)
	note := func(p string) workflows.RewindNote {
		n := workflows.RewindNote{CallID: "c-1", Tool: "close_ticket", Step: 1, BaseRunID: "run-1", Event: 4, Preview: p, Reset: reset}
		n.Token = s.token(f, "bob", signed.Claims{Action: signed.ActionRewind, CallID: n.CallID, Source: n.BaseRunID, Preview: p, Reset: reset})
		return n
	}
	recordOf := func(newRun string) *workflows.RewindRecord { // the record a worker makes of the rewind of note 6
		return &workflows.RewindRecord{WorkflowID: "default-test-workflow-id", BaseRunID: "run-1", Event: 4, NewRunID: newRun, CallID: "c-1",
			Preview: fmt.Sprintf("%064x", 6), By: "bob", Reset: reset, Signed: true}
	}
	events := []workflows.ResetEvent{
		{Found: true, BaseRunID: "run-0", NewRunID: "this", Made: true, Reason: "toolgate rewind, " + workflows.ResetMark(reset)},
		{Found: true, BaseRunID: "run-1", NewRunID: "another", Made: false, Reason: "toolgate rewind, " + workflows.ResetMark(reset)},
		{Found: true, BaseRunID: "run-1", NewRunID: "this", Made: true, Reason: "mallory's reset"},
		// Rules version 14: the reason copied, but no worker recorded the reset.
		{Found: true, BaseRunID: "run-1", NewRunID: "this", Made: true, Reason: "mallory's copy, " + workflows.ResetMark(reset)},
		// A record, but of the reset into another run.
		{Found: true, BaseRunID: "run-1", NewRunID: "this", Made: true, Reason: "toolgate rewind, " + workflows.ResetMark(reset), Record: recordOf("another")},
		{Found: true, BaseRunID: "run-1", NewRunID: "this", Made: true, Reason: "toolgate rewind, " + workflows.ResetMark(reset), Record: recordOf("this")},
	}
	calls := 0
	f.env.OnActivity(workflows.ResetActivity, mock.Anything, mock.Anything).Return(func(_ context.Context, req workflows.ResetRequest) (workflows.ResetEvent, error) {
		require.Equal(t, int64(4), req.Event)
		require.Equal(t, reset, req.Reset, "the run asks for the record of the reset its note names")
		ev := events[min(calls, len(events)-1)]
		calls++
		return ev, nil
	})
	f.at(time.Minute, func() {
		for i := range 7 { // the seventh: a second note, after one was taken
			f.env.SignalWorkflow(workflows.SignalRewound, note(fmt.Sprintf("%064x", i+1)))
		}
	})
	var st workflows.State
	f.at(2*time.Minute, func() { st = f.state(); f.signedReject(s, "alice", "c-1", "no") })
	res := f.run(scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`))))
	var refused []string
	for _, r := range st.Refused {
		refused = append(refused, r.Error)
	}
	require.Len(t, refused, 6, "%v", refused)
	require.Contains(t, refused[0], "the reset at event 4 reset run run-0 into run this; the note names a reset of run run-1")
	require.Contains(t, refused[1], "the reset at event 4 reset run run-1 into run another")
	require.Contains(t, refused[2], `its reason "mallory's reset" does not say "reset 0f0f`)
	require.Contains(t, refused[3], "no worker recorded carrying out the reset that made this run (toolgate-rewound-0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f in the authority namespace holds none)")
	require.Contains(t, refused[4], "names the reset of run run-1 of default-test-workflow-id at event 4 into run another")
	require.Contains(t, refused[5], "this run has taken the note of the reset that made it already")
	taken := 0
	for _, rec := range res.Trace {
		if rec.Status == workflows.TraceRewound {
			taken++
			require.Equal(t, "bob", rec.Approver)
			require.Contains(t, rec.Reason, fmt.Sprintf("preview %064x", 6))
		}
	}
	require.Equal(t, 1, taken)
}

// signedReject rejects callID as who, signed.
func (f *fixture) signedReject(s *signers, who, callID, reason string) {
	f.t.Helper()
	d := f.digest(callID)
	tok := s.token(f, who, signed.Claims{Action: signed.ActionReject, CallID: callID, ArgsDigest: d, Kind: "gate", Asked: f.asked(callID), Reason: reason})
	out := f.update(workflows.UpdateReject, workflows.DecisionInput{CallID: callID, ArgsDigest: d, Kind: "gate", Token: tok, Reason: reason})
	require.NoError(f.t, out.err)
}

// A fork's input names the source and the call and nothing else.
func TestAForkInputHoldsOnlyTheFork(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"fork":{"source":"s","at":"c-3"}}`, ""},
		{`{"fork":{"source":"s","at":"c-3","args":{"ticket_id":"TKT-4"}},"request_token":"x"}`, ""},
		{`{"fork":{"source":"s","at":"c-3"},"goal":"something else"}`, "a fork's input holds only fork"},
		{`{"fork":{"source":"s","at":"c-3"},"approval":"always_approve"}`, "a fork's input holds only fork"},
		{`{"fork":{"source":"s","at":"c-3"},"planner":{"kind":"scripted"}}`, "a fork's input holds only fork"},
		{`{"fork":{"source":"","at":"c-3"}}`, "fork.source: missing"},
		{`{"fork":{"source":"s","at":"3"}}`, `fork.at: "3"`},
		{`{"fork":{"source":"s","at":"c-03"}}`, `fork.at: "c-03"`},
		{`{"fork":{"source":"s","at":"c-3","args":[1]}}`, "fork.args: want a JSON object"},
		{`{"fork":{"source":"s","at":"c-3","argz":{}}}`, `unknown field "argz"`},
	} {
		_, err := workflows.ParseRunInput([]byte(tc.in))
		if tc.want == "" {
			require.NoError(t, err, tc.in)
		} else {
			require.ErrorContains(t, err, tc.want, tc.in)
		}
	}
}

// forkState is what the fork activity would read from a source run that
// searched, read an order, and proposed a close at c-3 (its step 3).
func forkState() workflows.ForkState {
	in := scripted(steps(call("search_tickets", `{"query":"login"}`)), steps(call("cached_status", `{"order_id":"ORD-1001"}`)),
		steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)), steps(call("cached_status", `{"order_id":"ORD-1001"}`)))
	return workflows.ForkState{RunID: "source-run", Step: 3, Input: in,
		State: workflows.Carry{Calls: 2, Steps: 2, Turn: 1, TurnSteps: 2,
			Memo: []workflows.MemoEntry{{Key: `cached_status::{"order_id":"ORD-1001"}`, Tool: "cached_status", Result: json.RawMessage(`{"status":"in transit"}`)}},
			// What the source's state held that a fork never takes.
			Grants: []workflows.Grant{{ID: "g-1", Tool: "close_ticket", By: "alice"}},
			Trace:  []workflows.TraceRecord{{Seq: 1, CallID: "c-1", Tool: "search_tickets", Status: workflows.TraceOK}}},
		Proposals: steps(call("close_ticket", `{"ticket_id":"TKT-3"}`))}
}

// A fork takes its source's settings and state from the fork activity,
// proposes the call's step again with the arguments replaced, waits for an
// approval of its own, and carries no grant and no trace of its source.
func TestAForkStartsFromItsSourcesState(t *testing.T) {
	f := newFixture(t)
	f.env.OnActivity(workflows.ForkActivity, mock.Anything, mock.Anything).Return(forkState(), nil)
	f.at(time.Minute, func() {
		st := f.state()
		require.Equal(t, workflows.StatusWaitingForApproval, st.Status)
		require.Len(t, st.Interrupts, 1)
		require.Equal(t, "c-3", st.Interrupts[0].CallID)
		require.JSONEq(t, `{"ticket_id":"TKT-4"}`, string(st.Interrupts[0].CallArgs))
		require.Empty(t, st.Grants)
		require.Equal(t, 1, st.Memo.Entries)
		f.approve("c-3")
	})
	res := f.run(workflows.RunInput{Fork: &workflows.Fork{Source: "source", At: "c-3", Args: json.RawMessage(`{"ticket_id":"TKT-4"}`)}})
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, workflows.TraceForked, res.Trace[0].Status)
	require.Contains(t, res.Trace[0].Reason, "forked from source (run source-run) at c-3, step 3")
	require.Equal(t, 1, f.desk.count("close_ticket"))
	var hit bool
	for _, rec := range res.Trace {
		require.NotEqual(t, "c-1", rec.CallID, "the source's trace is not carried")
		if rec.CallID == "c-4" {
			hit = rec.Status == workflows.TraceCacheHit
		}
	}
	require.True(t, hit, "c-4 repeats the source's read: answered from the carried memo; trace %v", statuses(res.Trace))
}

// Under a policy a fork is an operator's signed act: without a token, or
// with a non-operator's, it is refused before it reads its source.
func TestAForkUnderAPolicyNeedsAnOperator(t *testing.T) {
	s := operatorPolicy(newSigners(t))
	for _, who := range []string{"", "alice"} {
		f := newFixture(t, withPolicy(s.policy))
		read := false
		f.env.OnActivity(workflows.ForkActivity, mock.Anything, mock.Anything).Return(func(any, workflows.ForkSource) (workflows.ForkState, error) {
			read = true
			return forkState(), nil
		})
		in := workflows.RunInput{Fork: &workflows.Fork{Source: "source", At: "c-3"}}
		if who != "" {
			raw, err := json.Marshal(in)
			require.NoError(t, err)
			d, err := workflows.InputDigest(raw)
			require.NoError(t, err)
			in.RequestToken = s.token(f, who, signed.Claims{Action: signed.ActionFork, InputDigest: d})
		}
		f.env.ExecuteWorkflow(workflows.WorkflowName, in)
		err := f.env.GetWorkflowError()
		require.Error(t, err, who)
		want := "under this worker's policy a fork is an operator's signed act"
		if who == "alice" {
			want = "alice holds [support]; rewinding or forking a run needs one of the operators' roles [finance]"
		}
		require.ErrorContains(t, err, want)
		require.False(t, read, "a refused fork read its source")
	}
}
