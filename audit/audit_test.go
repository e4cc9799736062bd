package audit_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// histories are the recorded fixtures; retired those of retired rules
// versions, audited as recorded (an audit runs no workflow code).
const (
	histories = "../testsuite/histories"
	retired   = "../testsuite/histories/retired"
)

func fixture(t *testing.T, name string, pol *policy.Policy) audit.Report {
	t.Helper()
	rep, err := audit.File(filepath.Join(retired, name), pol)
	require.NoError(t, err)
	return rep
}

// summary is each entry as "kind via call approver rule result".
func summary(rep audit.Report) []string {
	var out []string
	for _, e := range rep.Entries {
		out = append(out, strings.Join([]string{e.Kind, e.Via, e.CallID, e.Approver, e.Rule, e.Result}, " "))
	}
	return out
}

func requireAllVerified(t *testing.T, rep audit.Report) {
	t.Helper()
	for _, e := range rep.Entries {
		assert.True(t, e.Verified, "%s %s by %s: %s", e.Kind, e.CallID, e.Approver, e.Problem)
		assert.Empty(t, e.Problem)
		assert.True(t, e.Applied)
	}
	assert.Empty(t, rep.Failed())
	assert.Zero(t, rep.Unverified())
	assert.Empty(t, rep.Mismatches())
	assert.True(t, rep.Recorded)
	assert.Equal(t, "history", rep.PolicyFrom)
	require.NotNil(t, rep.Policy)
	assert.Len(t, rep.Policy.Approvers, 4)
}

func TestPolicyRuleFixture(t *testing.T) {
	rep := fixture(t, "policy_rule.json", nil)
	requireAllVerified(t, rep)
	assert.Equal(t, "fixture-policy_rule", rep.WorkflowID)
	assert.Equal(t, []string{
		"rule trace c-1 rule:small-refunds small-refunds allow",
		"rule trace c-2 rule:no-test-refunds no-test-refunds deny",
		"approve update c-3 alice  approved",
	}, summary(rep))
	for _, e := range rep.Entries {
		assert.Len(t, e.Digest, 64, "%s %s", e.Kind, e.CallID)
	}
}

func TestPolicyQuorumFixture(t *testing.T) {
	rep := fixture(t, "policy_quorum.json", nil)
	requireAllVerified(t, rep)
	assert.Equal(t, []string{
		"start start  dave  ",
		"approve update c-1 bob large-refunds counted",
		"approve update c-1 carol large-refunds approved",
	}, summary(rep))
	assert.Equal(t, rep.Entries[1].Digest, rep.Entries[2].Digest, "both approvals sign the same arguments")
	assert.Equal(t, int64(1), rep.Entries[0].EventID)
}

func TestPolicyEditFixture(t *testing.T) {
	rep := fixture(t, "policy_edit.json", nil)
	requireAllVerified(t, rep)
	assert.Equal(t, []string{
		"grant update  carol  g-1",
		"approve update c-1 bob  approved",
		"grant-use trace c-2 grant:carol  grant g-1, use 1 of 1",
	}, summary(rep))
	assert.Equal(t, "refund", rep.Entries[0].Tool)
	edit := rep.Entries[1]
	assert.Len(t, edit.EditedDigest, 64, "the approval edited the call")
	assert.NotEqual(t, edit.Digest, edit.EditedDigest)
}

// An old fixture, from a worker without a policy: its decisions are listed,
// unsigned, and that fails nothing.
func TestUnsignedFixtures(t *testing.T) {
	for name, want := range map[string]string{
		"approve_v3.json": "unsigned update c-3 alice  approved",
		"reject_v3.json":  "unsigned signal c-3 bob  reject",
	} {
		rep := fixture(t, name, nil)
		assert.Equal(t, []string{want}, summary(rep), name)
		assert.Nil(t, rep.Policy, name)
		assert.False(t, rep.Recorded, name)
		e := rep.Entries[0]
		assert.False(t, e.Verified, name)
		assert.Equal(t, audit.ProblemUnsigned, e.Problem, name)
		assert.Empty(t, rep.Failed(), name)
		assert.Equal(t, 1, rep.Unverified(), name)
	}
}

// edit rewrites a fixture and writes it to a temporary file.
func edit(t *testing.T, name string, change func(*historypb.History)) string {
	t.Helper()
	f, err := os.Open(filepath.Join(retired, name))
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	change(h)
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(out, b, 0o644))
	return out
}

// editDecision rewrites the payload of the accepted update of the given
// name sent by approver.
func editDecision(t *testing.T, h *historypb.History, approver string, change func(*workflows.DecisionInput)) {
	t.Helper()
	for _, ev := range h.Events {
		u := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes()
		if u == nil {
			continue
		}
		p := u.GetAcceptedRequest().GetInput().GetArgs().GetPayloads()[0]
		var in workflows.DecisionInput
		require.NoError(t, json.Unmarshal(p.Data, &in))
		if in.Approver != approver {
			continue
		}
		change(&in)
		b, err := json.Marshal(in)
		require.NoError(t, err)
		p.Data = b
		return
	}
	t.Fatalf("no update from %s", approver)
}

// flipSignature changes one character in the middle of a token's signature.
func flipSignature(tok string) string {
	i := strings.LastIndexByte(tok, '.') + 20
	c := byte('A')
	if tok[i] == 'A' {
		c = 'B'
	}
	return tok[:i] + string(c) + tok[i+1:]
}

func entryBy(t *testing.T, rep audit.Report, kind, approver string) audit.Entry {
	t.Helper()
	for _, e := range rep.Entries {
		if e.Kind == kind && e.Approver == approver {
			return e
		}
	}
	t.Fatalf("no %s entry by %s in %q", kind, approver, summary(rep))
	return audit.Entry{}
}

func TestTamperedSignature(t *testing.T) {
	file := edit(t, "policy_quorum.json", func(h *historypb.History) {
		editDecision(t, h, "carol", func(in *workflows.DecisionInput) { in.Token = flipSignature(in.Token) })
	})
	rep, err := audit.File(file, nil)
	require.NoError(t, err)
	carol := entryBy(t, rep, audit.KindApprove, "carol")
	assert.False(t, carol.Verified)
	assert.Contains(t, carol.Problem, "bad signature")
	assert.True(t, entryBy(t, rep, audit.KindApprove, "bob").Verified, "the other approval is untouched")
	assert.Len(t, rep.Failed(), 1)
}

func TestTamperedStart(t *testing.T) {
	file := edit(t, "policy_quorum.json", func(h *historypb.History) {
		p := h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0]
		var in map[string]any
		require.NoError(t, json.Unmarshal(p.Data, &in))
		in["request_token"] = flipSignature(in["request_token"].(string))
		p.Data, _ = json.Marshal(in)
	})
	rep, err := audit.File(file, nil)
	require.NoError(t, err)
	start := entryBy(t, rep, audit.KindStart, "dave")
	assert.False(t, start.Verified)
	assert.Contains(t, start.Problem, "bad signature")
}

// A token sent for another call than the one it signs, or found in another
// run's history, does not verify.
func TestTokenOutOfPlace(t *testing.T) {
	file := edit(t, "policy_quorum.json", func(h *historypb.History) {
		editDecision(t, h, "bob", func(in *workflows.DecisionInput) { in.CallID = "c-2" })
	})
	rep, err := audit.File(file, nil)
	require.NoError(t, err)
	assert.Contains(t, entryBy(t, rep, audit.KindApprove, "bob").Problem, `the token is for call "c-1", sent for "c-2"`)

	file = edit(t, "policy_quorum.json", func(h *historypb.History) {
		h.Events[0].GetWorkflowExecutionStartedEventAttributes().WorkflowId = "another-run"
	})
	rep, err = audit.File(file, nil)
	require.NoError(t, err)
	assert.Len(t, rep.Failed(), 3)
	for _, e := range rep.Entries {
		assert.Contains(t, e.Problem, `the token is for run "fixture-policy_quorum", not this run ("another-run")`)
	}
}

// clonePolicy is a deep copy of p.
func clonePolicy(t *testing.T, p *policy.Policy) *policy.Policy {
	t.Helper()
	b, err := json.Marshal(p)
	require.NoError(t, err)
	var c policy.Policy
	require.NoError(t, json.Unmarshal(b, &c))
	return &c
}

// Against a policy kept apart that gives bob another key, bob's approval
// does not verify.
func TestAnotherKey(t *testing.T) {
	pol := clonePolicy(t, fixture(t, "policy_quorum.json", nil).Policy)
	pub, _, err := signed.GenerateKey()
	require.NoError(t, err)
	bob := pol.Approvers["bob"]
	bob.Key = signed.FormatPublicKey(pub)
	pol.Approvers["bob"] = bob

	rep := fixture(t, "policy_quorum.json", pol)
	assert.Equal(t, "given", rep.PolicyFrom)
	assert.Same(t, pol, rep.Policy)
	e := entryBy(t, rep, audit.KindApprove, "bob")
	assert.False(t, e.Verified)
	assert.Contains(t, e.Problem, "bad signature")
	assert.True(t, entryBy(t, rep, audit.KindApprove, "carol").Verified)
	assert.Len(t, rep.Failed(), 1)

	delete(pol.Approvers, "carol")
	rep = fixture(t, "policy_quorum.json", pol)
	assert.Contains(t, entryBy(t, rep, audit.KindApprove, "carol").Problem, `unknown approver "carol"`)
}

// A rule decision is checked against the policy's rules: a policy whose
// small-refunds rule would not allow the refund fails it.
func TestRuleAgainstAnotherPolicy(t *testing.T) {
	pol := clonePolicy(t, fixture(t, "policy_rule.json", nil).Policy)
	refund := pol.Tools["refund"]
	refund.Rules[0].When = "args.amount_cents <= 1000"
	pol.Tools["refund"] = refund

	rep := fixture(t, "policy_rule.json", pol)
	e := entryBy(t, rep, audit.KindRule, "rule:small-refunds")
	assert.False(t, e.Verified)
	assert.Contains(t, e.Problem, "not allow by rule small-refunds")
	assert.True(t, entryBy(t, rep, audit.KindRule, "rule:no-test-refunds").Verified)
	assert.True(t, entryBy(t, rep, audit.KindApprove, "alice").Verified)
}

// A grant use relies on the grant: one whose token does not verify fails it.
func TestGrantUseNeedsTheGrant(t *testing.T) {
	file := edit(t, "policy_edit.json", func(h *historypb.History) {
		for _, ev := range h.Events {
			u := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes()
			if u.GetAcceptedRequest().GetInput().GetName() != workflows.UpdateGrant {
				continue
			}
			p := u.GetAcceptedRequest().GetInput().GetArgs().GetPayloads()[0]
			var in workflows.TokenInput
			require.NoError(t, json.Unmarshal(p.Data, &in))
			in.Token = flipSignature(in.Token)
			p.Data, _ = json.Marshal(in)
		}
	})
	rep, err := audit.File(file, nil)
	require.NoError(t, err)
	assert.Contains(t, entryBy(t, rep, audit.KindGrant, "carol").Problem, "bad signature")
	assert.Contains(t, entryBy(t, rep, audit.KindGrantUse, "grant:carol").Problem, "grant g-1 does not verify")
	assert.Len(t, rep.Failed(), 2)
}

func TestNotAHistory(t *testing.T) {
	_, err := audit.History(strings.NewReader(`{"events": []}`), nil)
	assert.Error(t, err)
	_, err = audit.History(strings.NewReader(`not json`), nil)
	assert.Error(t, err)
}

// A signed start binds the goal: another goal in the history fails it.
func TestStartForAnotherGoal(t *testing.T) {
	file := edit(t, "policy_quorum.json", func(h *historypb.History) {
		p := h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0]
		var in map[string]any
		require.NoError(t, json.Unmarshal(p.Data, &in))
		in["goal"] = "refund all of BK-2"
		p.Data, _ = json.Marshal(in)
	})
	rep, err := audit.File(file, nil)
	require.NoError(t, err)
	assert.Contains(t, entryBy(t, rep, audit.KindStart, "dave").Problem, "signs another goal")
	assert.Len(t, rep.Failed(), 1)
}

// The calls an external planner proposed (toolgate as an MCP server) are
// audited like any other: the close ran with the arguments alice approved
// by update, and the attach by key ran nothing more.
func TestExternalPlannerFixture(t *testing.T) {
	rep := fixture(t, "external_v5.json", nil)
	assert.Equal(t, "fixture-external", rep.WorkflowID)
	assert.Equal(t, []string{"unsigned update c-3 alice  approved"}, summary(rep))
	require.Len(t, rep.Executions, 1, "one executed call that needed a decision")
	e := rep.Executions[0]
	assert.Equal(t, "c-3", e.CallID)
	assert.Equal(t, "close_ticket", e.Tool)
	assert.True(t, e.Matched, e.Problem)
	assert.Empty(t, rep.Mismatches())
}

// Every outcome a human decision has (rules version 6) is listed, signed and
// verified: answers in the tool's place (respond, one of a destructive tool
// a rule allows), a cancellation, and an edit whose close ran with the
// edited arguments.
func TestOutcomesFixture(t *testing.T) {
	rep := fixture(t, "outcomes_v6.json", nil)
	requireAllVerified(t, rep)
	assert.Equal(t, 6, rep.Version)
	assert.ElementsMatch(t, []string{
		"respond update c-1 alice ask-archive responded",
		"reject update c-2 alice  cancelled",
		"respond update c-3 alice answer-tkt-5 responded",
		"approve update c-4 alice  approved",
	}, summary(rep))
	require.Len(t, rep.Executions, 1, "only the edited close ran")
	e := rep.Executions[0]
	assert.Equal(t, "c-4", e.CallID)
	assert.True(t, e.Matched, e.Problem)
}

// The run's own record of an edited call must agree with what ran: a trace
// whose edited record names other arguments than the executed close's is a
// mismatch.
func TestEditedRecordMustAgreeWithWhatRan(t *testing.T) {
	file := edit(t, "outcomes_v6.json", func(h *historypb.History) {
		ev := h.Events[len(h.Events)-1].GetWorkflowExecutionCompletedEventAttributes()
		require.NotNil(t, ev, "the fixture's last event is its completion")
		p := ev.GetResult().GetPayloads()[0]
		var res workflows.RunResult
		require.NoError(t, json.Unmarshal(p.Data, &res))
		found := false
		for i, r := range res.Trace {
			if r.CallID == "c-4" && r.Status == workflows.TraceEdited {
				res.Trace[i].Args, found = json.RawMessage(`{"ticket_id":"TKT-4"}`), true
			}
		}
		require.True(t, found, "the fixture records c-4 as edited")
		p.Data, _ = json.Marshal(res)
	})
	rep, err := audit.File(file, nil)
	require.NoError(t, err)
	require.Len(t, rep.Mismatches(), 1)
	assert.Contains(t, rep.Mismatches()[0].Problem, "the run's trace records c-4 approved (by alice) with other arguments")
}

// The base run of rewound_v7.json: the run dave rewound, whose events up to
// the reset point its new run holds.
const rewoundBase = "01a2327d-b6d1-7257-8b84-ad8e8451e322"

// A rewound run (rules version 7): dave's signed rewind note, verified
// (an operator, for this run, the call, the base run and the preview), and
// tied to the reset the history holds; alice's approval after the reset is
// what let the close run again.
func TestRewoundFixture(t *testing.T) {
	rep := fixture(t, "rewound_v7.json", nil)
	requireAllVerified(t, rep)
	assert.Equal(t, 7, rep.Version)
	assert.Equal(t, []string{
		"rewind signal c-2 dave  rewound to just before c-2 (step 2): run " + rewoundBase + " reset to event 14",
		"approve update c-2 alice  approved",
	}, summary(rep))
	rw := rep.Entries[0]
	assert.Equal(t, "close_ticket", rw.Tool)
	assert.Len(t, rw.Digest, 64, "the preview's digest")
	assert.True(t, rw.Signed())
	require.Len(t, rep.Executions, 1)
	assert.True(t, rep.Executions[0].Matched, rep.Executions[0].Problem)
}

// A fork (rules version 7): its start is dave's signed fork over its input
// (an operator, input_digest), listed as a fork of its source at c-2 with
// the arguments it replaced.
func TestForkedFixture(t *testing.T) {
	rep := fixture(t, "forked_v7.json", nil)
	requireAllVerified(t, rep)
	assert.Equal(t, 7, rep.Version)
	assert.Equal(t, []string{
		`fork start c-2 dave  fork of fixture-forked-source at c-2, its arguments replaced with {"ticket_id":"TKT-1"}`,
		"approve update c-2 alice  approved",
	}, summary(rep))
	assert.Equal(t, "close_ticket", rep.Entries[0].Tool)
	assert.True(t, rep.Entries[0].Signed())
	require.Len(t, rep.Executions, 1)
	assert.True(t, rep.Executions[0].Matched, rep.Executions[0].Problem)
}

// editRewindNote rewrites the rewound signal's note.
func editRewindNote(t *testing.T, h *historypb.History, change func(*workflows.RewindNote)) {
	t.Helper()
	for _, ev := range h.Events {
		s := ev.GetWorkflowExecutionSignaledEventAttributes()
		if s.GetSignalName() != workflows.SignalRewound {
			continue
		}
		p := s.GetInput().GetPayloads()[0]
		var n workflows.RewindNote
		require.NoError(t, json.Unmarshal(p.Data, &n))
		change(&n)
		p.Data, _ = json.Marshal(n)
		return
	}
	t.Fatal("no rewound signal")
}

// withClaim sets one claim of a token, keeping its signature (which then
// no longer verifies).
func withClaim(t *testing.T, tok, claim string, v any) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3)
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var c map[string]any
	require.NoError(t, json.Unmarshal(raw, &c))
	c[claim] = v
	raw, _ = json.Marshal(c)
	parts[1] = base64.RawURLEncoding.EncodeToString(raw)
	return strings.Join(parts, ".")
}

// entryOf is the report's first entry of kind.
func entryOf(t *testing.T, rep audit.Report, kind string) audit.Entry {
	t.Helper()
	for _, e := range rep.Entries {
		if e.Kind == kind {
			return e
		}
	}
	t.Fatalf("no %s entry in %q", kind, summary(rep))
	return audit.Entry{}
}

// failedKinds is the kind of each entry that fails the audit.
func failedKinds(rep audit.Report) []string {
	var out []string
	for _, e := range rep.Failed() {
		out = append(out, e.Kind)
	}
	return out
}

// A rewind note that does not verify fails, and so does the reset it was
// meant to attribute: a reset no verified note follows is unattributed.
func TestRewindTampered(t *testing.T) {
	for _, c := range []struct {
		name    string
		change  func(*workflows.RewindNote)
		problem string
	}{
		{"the token's approver swapped for alice (no operator)", func(n *workflows.RewindNote) { n.Token = withClaim(t, n.Token, "sub", "alice") },
			"bad signature: not signed with alice's key in the policy"},
		{"a flipped signature", func(n *workflows.RewindNote) { n.Token = flipSignature(n.Token) }, "bad signature"},
		{"the token signs another act", func(n *workflows.RewindNote) { n.Token = withClaim(t, n.Token, "act", "fork") }, "bad signature"},
		{"another call", func(n *workflows.RewindNote) { n.CallID = "c-1" },
			"the token signs a rewind of run " + rewoundBase + " to c-2 from preview"},
		{"another preview", func(n *workflows.RewindNote) { n.Preview = strings.Repeat("0", 64) }, "not the note's (run " + rewoundBase + " to c-2 from preview 000000000000…)"},
		{"another base run", func(n *workflows.RewindNote) { n.BaseRunID = "another-run" }, "not the note's (run another-run to c-2"},
		{"another reset point", func(n *workflows.RewindNote) { n.Event = 9 },
			"the note names a reset of run " + rewoundBase + " to event 9, the history's is to event 14"},
		{"unsigned", func(n *workflows.RewindNote) { n.Token = "" }, "unsigned: the run's policy takes a rewind only signed by an operator"},
		{"in another run's history", nil, `the token is for run "fixture-rewound", not this run ("another-run")`},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := edit(t, "rewound_v7.json", func(h *historypb.History) {
				if c.change == nil {
					h.Events[0].GetWorkflowExecutionStartedEventAttributes().WorkflowId = "another-run"
					return
				}
				editRewindNote(t, h, c.change)
			})
			rep, err := audit.File(file, nil)
			require.NoError(t, err)
			rw := entryOf(t, rep, audit.KindRewind)
			assert.False(t, rw.Verified)
			assert.Contains(t, rw.Problem, c.problem)
			reset := entryBy(t, rep, audit.KindReset, "")
			assert.Equal(t, audit.ViaReset, reset.Via)
			assert.Equal(t, int64(14), reset.EventID)
			assert.Contains(t, reset.Result, "run "+rewoundBase+" reset: \"toolgate rewind to just before c-2 (step 2) by dave")
			assert.Contains(t, reset.Problem, "unattributed reset: no verified rewind note (an operator's signed rewind) follows it")
			want := []string{audit.KindRewind, audit.KindReset}
			if c.change == nil {
				want = append(want, audit.KindApprove) // alice's token names the run too
			} else {
				assert.True(t, entryBy(t, rep, audit.KindApprove, "alice").Verified, "the approval is untouched")
			}
			assert.ElementsMatch(t, want, failedKinds(rep))
			// The run's trace records the rewind it took: a note naming
			// another call, base run or preview is not the one it took.
			taken := c.name != "another call" && c.name != "another base run" && c.name != "another preview"
			assert.Equal(t, taken, rw.Applied, rw.Result)
			assert.Equal(t, !taken, strings.HasSuffix(rw.Result, "; not taken by the run (its trace records no such rewind)"), rw.Result)
		})
	}
}

// A reset with no rewound note after it (as `temporal workflow reset`
// makes one) is listed as unattributed, and fails under a policy; a note
// naming a reset the history does not hold fails.
func TestResetUnattributed(t *testing.T) {
	file := edit(t, "rewound_v7.json", func(h *historypb.History) {
		for _, ev := range h.Events {
			if s := ev.GetWorkflowExecutionSignaledEventAttributes(); s.GetSignalName() == workflows.SignalRewound {
				s.SignalName = "something-else"
			}
		}
	})
	rep, err := audit.File(file, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"reset reset    run " + rewoundBase + ` reset: "toolgate rewind to just before c-2 (step 2) by dave, preview 0bee20c786dbeb095e33db234295cce519bcd56a08a7470e32679b0859f30f52"`,
		"approve update c-2 alice  approved",
	}, summary(rep))
	assert.Equal(t, []string{audit.KindReset}, failedKinds(rep))
	assert.False(t, rep.Entries[0].Signed())

	file = edit(t, "rewound_v7.json", func(h *historypb.History) {
		for _, ev := range h.Events {
			if f := ev.GetWorkflowTaskFailedEventAttributes(); f != nil {
				f.BaseRunId = "another-run"
			}
		}
	})
	rep, err = audit.File(file, nil)
	require.NoError(t, err)
	assert.Contains(t, entryBy(t, rep, audit.KindRewind, "dave").Problem, "no reset of run "+rewoundBase+" precedes the note in this history")
	assert.Contains(t, entryBy(t, rep, audit.KindReset, "").Result, "run another-run reset")
	assert.ElementsMatch(t, []string{audit.KindRewind, audit.KindReset}, failedKinds(rep))
}

// Against a policy kept apart whose operators dave holds no role of, his
// rewind and his fork do not verify: only an operator may rewind or fork.
func TestRewindAndForkNeedAnOperator(t *testing.T) {
	for name, kind := range map[string]string{"rewound_v7.json": audit.KindRewind, "forked_v7.json": audit.KindFork} {
		pol := clonePolicy(t, fixture(t, name, nil).Policy)
		require.Equal(t, []string{"ops"}, pol.Operators)
		pol.Operators = []string{"finance"}
		rep := fixture(t, name, pol)
		e := entryOf(t, rep, kind)
		assert.False(t, e.Verified, name)
		assert.Contains(t, e.Problem, "not an operator's "+e.Kind+": dave holds [ops]; rewinding or forking a run needs one of the operators' roles [finance]", name)
		assert.True(t, entryBy(t, rep, audit.KindApprove, "alice").Verified, name)
		want := []string{kind}
		if kind == audit.KindRewind {
			want = append(want, audit.KindReset) // no verified note attributes the reset
		}
		assert.ElementsMatch(t, want, failedKinds(rep), name)

		pol.Operators = nil
		rep = fixture(t, name, pol)
		assert.Contains(t, entryOf(t, rep, kind).Problem, "names no operators", name)
	}
}

// A fork's token binds its whole input (input_digest), is dave's (the
// signature), for this workflow id, and comes as a fork.
func TestForkTampered(t *testing.T) {
	for _, c := range []struct {
		name    string
		change  func(*historypb.History)
		problem string
	}{
		{"other arguments", func(h *historypb.History) {
			editInput(t, h, func(in map[string]any) { in["fork"].(map[string]any)["args"] = map[string]any{"ticket_id": "TKT-9"} })
		}, "the token signs another input: its input_digest"},
		{"another source", func(h *historypb.History) {
			editInput(t, h, func(in map[string]any) { in["fork"].(map[string]any)["source"] = "fixture-approve" })
		}, "the token signs another input"},
		{"the approver swapped for alice", func(h *historypb.History) {
			editInput(t, h, func(in map[string]any) {
				in["request_token"] = withClaim(t, in["request_token"].(string), "sub", "alice")
			})
		}, "bad signature: not signed with alice's key"},
		{"another workflow id", func(h *historypb.History) {
			h.Events[0].GetWorkflowExecutionStartedEventAttributes().WorkflowId = "another-fork"
		}, `the token is for run "fixture-forked", not this run ("another-fork")`},
		{"a fork token as a plain start", func(h *historypb.History) {
			editInput(t, h, func(in map[string]any) { delete(in, "fork"); in["goal"] = "close TKT-1" })
		}, `the token signs "fork" but came as "start"`},
		{"unsigned", func(h *historypb.History) {
			editInput(t, h, func(in map[string]any) { delete(in, "request_token") })
		}, "unsigned: the run's policy takes a fork only signed by an operator"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, err := audit.File(edit(t, "forked_v7.json", c.change), nil)
			require.NoError(t, err)
			e := rep.Entries[0]
			assert.Contains(t, []string{audit.KindFork, audit.KindStart}, e.Kind, summary(rep))
			assert.False(t, e.Verified)
			assert.Contains(t, e.Problem, c.problem)
			assert.Contains(t, failedKinds(rep), e.Kind)
		})
	}
}

// withoutPolicy removes the policy from the run's recorded config, as a
// run on a worker without --policy records it.
func withoutPolicy(t *testing.T, h *historypb.History) {
	t.Helper()
	editConfig(t, h, func(c *workflows.WorkerConfig) { c.Policy = nil })
}

// Without a policy a rewind note is unsigned and says who rewound the run
// as they say: it attributes the reset, and fails nothing; a reset with no
// note is listed as unattributed, and fails nothing either. (alice's
// approval is unsigned too, as without a policy.)
func TestRewindWithoutPolicy(t *testing.T) {
	file := edit(t, "rewound_v7.json", func(h *historypb.History) {
		withoutPolicy(t, h)
		editDecision(t, h, "alice", func(in *workflows.DecisionInput) { in.Token = "" })
		editRewindNote(t, h, func(n *workflows.RewindNote) { n.Token = "" })
	})
	rep, err := audit.File(file, nil)
	require.NoError(t, err)
	require.False(t, rep.Recorded)
	rw := rep.Entries[0]
	assert.Equal(t, "rewind signal c-2 dave  rewound to just before c-2 (step 2): run "+rewoundBase+" reset to event 14", summary(rep)[0])
	assert.True(t, rw.Unsigned)
	assert.False(t, rw.Signed())
	assert.Equal(t, audit.ProblemUnsigned, rw.Problem)
	assert.Empty(t, rep.Failed())
	for _, e := range rep.Entries {
		assert.NotEqual(t, audit.KindReset, e.Kind, "the note attributes the reset")
	}

	file = edit(t, "rewound_v7.json", func(h *historypb.History) {
		withoutPolicy(t, h)
		editDecision(t, h, "alice", func(in *workflows.DecisionInput) { in.Token = "" })
		for _, ev := range h.Events {
			if s := ev.GetWorkflowExecutionSignaledEventAttributes(); s.GetSignalName() == workflows.SignalRewound {
				s.SignalName = "something-else"
			}
		}
	})
	rep, err = audit.File(file, nil)
	require.NoError(t, err)
	reset := entryBy(t, rep, audit.KindReset, "")
	assert.Equal(t, "unattributed reset: no rewind note follows it; its reason is whatever whoever reset the run wrote", reset.Problem)
	assert.Empty(t, rep.Failed())
	assert.Equal(t, 2, rep.Unverified())
}

// A fork's signer requested the run: as any requester, they may decide
// none of its calls. (alice, with a key the test holds and the ops role,
// signs the fork and her approval again.)
func TestForkRequesterApprovesNothing(t *testing.T) {
	file := edit(t, "forked_v7.json", func(h *historypb.History) {
		pub, priv, err := signed.GenerateKey()
		require.NoError(t, err)
		editConfig(t, h, func(c *workflows.WorkerConfig) {
			c.Policy.Approvers["alice"] = policy.Approver{Key: signed.FormatPublicKey(pub), Roles: []string{"support", "ops"}}
		})
		editDecision(t, h, "alice", func(in *workflows.DecisionInput) {
			in.Token = must(signed.Sign(priv, must(signed.Peek(in.Token))))
		})
		editInput(t, h, func(in map[string]any) {
			c := must(signed.Peek(in["request_token"].(string)))
			c.Approver = "alice"
			in["request_token"] = must(signed.Sign(priv, c))
		})
	})
	rep := auditFile(t, file, nil)
	assert.Empty(t, rep.Failed(), "every token verifies")
	assert.Equal(t, "alice", entryOf(t, rep, audit.KindFork).Approver)
	x := onlyMismatch(t, rep)
	assert.Equal(t, "c-2", x.CallID)
	assert.Contains(t, x.Problem, "and has 0")
}

// A fork the run refused (it failed "fork refused: …") is not applied: an
// unsigned one under a policy then fails nothing, the run having done
// nothing with it.
func TestForkRefused(t *testing.T) {
	file := edit(t, "forked_v7.json", func(h *historypb.History) {
		editInput(t, h, func(in map[string]any) { delete(in, "request_token") })
		last := h.Events[len(h.Events)-1]
		last.EventType = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED
		last.Attributes = &historypb.HistoryEvent_WorkflowExecutionFailedEventAttributes{WorkflowExecutionFailedEventAttributes: &historypb.WorkflowExecutionFailedEventAttributes{
			Failure: &failurepb.Failure{Message: "fork refused: under this worker's policy a fork is an operator's signed act"}}}
	})
	rep := auditFile(t, file, nil)
	fork := entryOf(t, rep, audit.KindFork)
	assert.True(t, fork.Unsigned)
	assert.False(t, fork.Applied)
	assert.Equal(t, "refused: fork refused: under this worker's policy a fork is an operator's signed act", fork.Result)
	assert.NotContains(t, failedKinds(rep), audit.KindFork)
}

// A decision by link (rules version 8) verifies with the policy's
// link_key for an approver whose via names its channel, and says so; a
// policy that no longer lets alice decide by e-mail fails it.
func TestDecisionByLinkFixture(t *testing.T) {
	rep := fixture(t, "notified_v8.json", nil)
	requireAllVerified(t, rep)
	assert.Equal(t, 8, rep.Version)
	assert.Equal(t, []string{"approve update c-2 alice  approved"}, summary(rep))
	assert.Equal(t, "email", rep.Entries[0].Channel)
	require.Len(t, rep.Executions, 1)
	assert.True(t, rep.Executions[0].Matched, rep.Executions[0].Problem)

	pol := clonePolicy(t, rep.Policy)
	alice := pol.Approvers["alice"]
	alice.Via = nil
	pol.Approvers["alice"] = alice
	rep = fixture(t, "notified_v8.json", pol)
	require.Len(t, rep.Failed(), 1)
	assert.Contains(t, rep.Failed()[0].Problem, "alice may not decide through email")
}

// A session run driven through Nexus: the approval (unsigned: no policy)
// and the withdrawal of the close whose caller cancelled its operation,
// listed with what the run answered; neither fails the audit.
func TestWithdrawalFixture(t *testing.T) {
	rep := fixture(t, "nexus_v10.json", nil)
	assert.Equal(t, []string{"unsigned update c-3 alice  approved", "withdraw update c-4 (caller)  cancelled"}, summary(rep))
	w := rep.Entries[1]
	assert.True(t, w.Applied)
	assert.False(t, w.Verified)
	assert.Empty(t, w.Problem)
	assert.Empty(t, rep.Failed())
}
