package audit_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

const histories = "../testsuite/histories"

func fixture(t *testing.T, name string, pol *policy.Policy) audit.Report {
	t.Helper()
	rep, err := audit.File(filepath.Join(histories, name), pol)
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
	f, err := os.Open(filepath.Join(histories, name))
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
