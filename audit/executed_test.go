package audit_test

import (
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	updatepb "go.temporal.io/api/update/v1"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// executions is each execution as "call tool by: basis" (or "… MISMATCH").
func executions(rep audit.Report) []string {
	var out []string
	for _, x := range rep.Executions {
		check := x.Basis
		switch {
		case x.Unbound:
			check = "NOT TIED"
		case !x.Matched:
			check = "MISMATCH"
		}
		out = append(out, x.CallID+" "+x.Tool+" "+x.By+": "+check)
	}
	return out
}

// The recorded policy fixtures: every executed call matches what let it run.
func TestExecutionsOfPolicyFixtures(t *testing.T) {
	for name, want := range map[string][]string{
		"policy_rule.json": {
			"c-1 refund rule:small-refunds: rule small-refunds allows these arguments",
			"c-3 close_ticket alice: approved by alice (needed 1 approver with role support, as the tool's default asks)",
		},
		"policy_quorum.json": {
			"c-1 refund bob, carol: approved by bob, carol (needed 2 distinct approvers with role finance, as rule large-refunds asks)",
		},
		"policy_edit.json": {
			"c-1 refund bob: approved by bob (needed 1 approver with role finance, as the tool's default asks)",
			"c-2 refund grant:carol: grant g-1 by carol (refund when args.amount_cents <= 5000), answering ask by the tool's default for 1 approver with role finance",
		},
	} {
		rep := fixture(t, name, nil)
		assert.Equal(t, want, executions(rep), name)
		assert.Empty(t, rep.Mismatches(), name)
		assert.Empty(t, rep.Failed(), name)
		assert.Equal(t, 4, rep.Version, name)
		for _, x := range rep.Executions {
			d, err := tool.Digest(x.Tool, x.Args)
			require.NoError(t, err)
			assert.Equal(t, d, x.Digest, "%s %s", name, x.CallID)
		}
		require.NotEmpty(t, rep.Notes, name)
		assert.True(t, strings.HasPrefix(rep.Notes[0], audit.NoteUnvouchedPolicy+": whoever answered the run's first workflow task wrote it"), "%s: %s", name, rep.Notes[0])
		assert.Contains(t, rep.Notes[0], "To check against the real one: toolgate audit HISTORY.json --policy FILE", name)
	}
}

// Runs without a policy: an approval's args_digest is what ran. A run from
// before rules version 3 took an approval without one: it cannot be tied,
// and that fails nothing.
func TestExecutionsWithoutPolicy(t *testing.T) {
	for _, name := range []string{"approve.json", "approve_v3.json", "interrupt.json", "interrupt_v3.json", "parallel_v3.json", "support_planner.json"} {
		rep := fixture(t, name, nil)
		require.NotEmpty(t, rep.Executions, name)
		for _, x := range rep.Executions {
			assert.True(t, x.Matched, "%s %s: %s", name, x.CallID, x.Problem)
			assert.Contains(t, x.Basis, "(unsigned: the run had no policy), its args_digest what ran", name)
		}
		assert.Contains(t, rep.Notes[0], "the run had no policy: its approvals are unauthenticated", name)
	}
	rep := fixture(t, "parallel.json", nil)
	require.Len(t, rep.Executions, 1)
	x := rep.Executions[0]
	assert.True(t, x.Unbound)
	assert.False(t, x.Matched)
	assert.Contains(t, x.Problem, "the approval by alice names no args_digest (runs before rules version 3 took decisions without it)")
	assert.Empty(t, rep.Mismatches())

	// the same run at rules version 3, where every decision names it: a
	// missing args_digest is a mismatch
	file := edit(t, "parallel.json", func(h *historypb.History) { setVersion(t, h, 3) })
	rep, err := audit.File(file, nil)
	require.NoError(t, err)
	require.Len(t, rep.Mismatches(), 1)
	assert.Contains(t, rep.Mismatches()[0].Problem, "what was approved: alice approved no args_digest")
}

// editRequest rewrites the tool.Request of every ActivityTaskScheduled
// event of the call.
func editRequest(t *testing.T, h *historypb.History, callID string, change func(*tool.Request)) {
	t.Helper()
	n := 0
	for _, ev := range h.Events {
		s := ev.GetActivityTaskScheduledEventAttributes()
		if s == nil {
			continue
		}
		p := s.GetInput().GetPayloads()[0]
		var req tool.Request
		require.NoError(t, json.Unmarshal(p.Data, &req))
		if req.CallID != callID {
			continue
		}
		change(&req)
		b, err := json.Marshal(req)
		require.NoError(t, err)
		p.Data = b
		n++
	}
	require.Positive(t, n, "no activity of %s", callID)
}

// setArgs sets a request's arguments.
func setArgs(args string) func(*tool.Request) {
	return func(r *tool.Request) { r.Args = json.RawMessage(args) }
}

// setVersion sets the run's rules version (its GetVersion marker).
func setVersion(t *testing.T, h *historypb.History, v int) {
	t.Helper()
	for _, ev := range h.Events {
		if m := ev.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "Version" {
			m.Details["version"].Payloads[0].Data = []byte(strings.TrimSpace(string(must(json.Marshal(v)))))
			return
		}
	}
	// a run from before the marker: add one where the first workflow task ends
	ev := &historypb.HistoryEvent{EventId: h.Events[3].EventId, EventTime: h.Events[3].EventTime, EventType: enumspb.EVENT_TYPE_MARKER_RECORDED,
		Attributes: &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{
			MarkerName: "Version",
			Details:    map[string]*commonpb.Payloads{"change-id": jsonPayloads(t, "decision-kind"), "version": jsonPayloads(t, v)},
		}}}
	h.Events = append(h.Events[:4], append([]*historypb.HistoryEvent{ev}, h.Events[4:]...)...)
}

func jsonPayloads(t *testing.T, v any) *commonpb.Payloads {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return &commonpb.Payloads{Payloads: []*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: b}}}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func auditFile(t *testing.T, file string, pol *policy.Policy) audit.Report {
	t.Helper()
	rep, err := audit.File(file, pol)
	require.NoError(t, err)
	return rep
}

// onlyMismatch is the report's one mismatch.
func onlyMismatch(t *testing.T, rep audit.Report) audit.Execution {
	t.Helper()
	ms := rep.Mismatches()
	require.Len(t, ms, 1, "%q", executions(rep))
	assert.False(t, ms[0].Matched)
	assert.Empty(t, ms[0].Basis)
	return ms[0]
}

// The history: the refund that ran was changed after the quorum
// approved it. Every signature still verifies; what ran is not what bob
// and carol signed.
func TestExecutedRefundTampered(t *testing.T) {
	for _, args := range []string{
		`{"amount_cents":4000000,"booking_id":"BK-2"}`, // the amount
		`{"amount_cents":30000,"booking_id":"BK-1"}`,   // any change
		`{"amount_cents":30000,"booking_id":"BK-2","reason":"x"}`,
	} {
		file := edit(t, "policy_quorum.json", func(h *historypb.History) { editRequest(t, h, "c-1", setArgs(args)) })
		rep := auditFile(t, file, nil)
		assert.Empty(t, rep.Failed(), "the decisions themselves are untouched")
		x := onlyMismatch(t, rep)
		assert.Equal(t, "c-1", x.CallID)
		assert.JSONEq(t, args, string(x.Args))
		assert.Contains(t, x.Problem, "c-1 refund ran "+args+" (digest ")
		assert.Contains(t, x.Problem, "it needed 2 distinct approvers with role finance approving what ran (as rule large-refunds asks), and has 0; "+
			`what was approved: bob approved digest 5047d101fb25… = {"amount_cents":30000,"booking_id":"BK-2"}; carol approved digest 5047d101fb25… = {"amount_cents":30000,"booking_id":"BK-2"}`)
	}
}

// An approver's edit approves the edited arguments: the call run with the
// ones proposed (which the token also names, as digest) does not match.
func TestExecutedEditTampered(t *testing.T) {
	file := edit(t, "policy_edit.json", func(h *historypb.History) {
		editRequest(t, h, "c-1", setArgs(`{"amount_cents":9000,"booking_id":"BK-1"}`))
	})
	x := onlyMismatch(t, auditFile(t, file, nil))
	assert.Equal(t, "c-1", x.CallID)
	assert.Contains(t, x.Problem, `what was approved: bob approved digest f5eb93faf949… = {"amount_cents":8000,"booking_id":"BK-1"}`)
}

// A call a grant let through, tampered: outside the grant's condition, into
// a quorum (no grant answers one), or within the condition but not what
// the run's trace approved.
func TestExecutedGrantUseTampered(t *testing.T) {
	for args, want := range map[string]string{
		`{"amount_cents":9000,"booking_id":"BK-1"}`:  "grant g-1 by carol lets refund through only when args.amount_cents <= 5000, and these arguments do not match it",
		`{"amount_cents":30000,"booking_id":"BK-1"}`: "grant g-1 by carol let it run, and the policy decides ask by rule large-refunds for 2 distinct approvers with role finance: a grant never answers a quorum",
		`{"amount_cents":2000,"booking_id":"BK-1"}`:  "grant g-1 by carol let it run, and for these arguments the policy decides allow by rule small-refunds: a grant answers only an ask",
		`{"amount_cents":4000,"booking_id":"BK-1"}`:  `the run's trace records c-2 approved (by grant:carol) with other arguments: {"amount_cents":5000,"booking_id":"BK-1"}`,
	} {
		file := edit(t, "policy_edit.json", func(h *historypb.History) { editRequest(t, h, "c-2", setArgs(args)) })
		x := onlyMismatch(t, auditFile(t, file, nil))
		assert.Equal(t, "c-2", x.CallID, args)
		assert.Contains(t, x.Problem, "c-2 refund ran "+args, args)
		assert.Contains(t, x.Problem, want, args)
	}
}

// A call a rule allowed, tampered into an amount that needs a quorum.
func TestExecutedRuleAllowedTampered(t *testing.T) {
	file := edit(t, "policy_rule.json", func(h *historypb.History) {
		editRequest(t, h, "c-1", setArgs(`{"amount_cents":30000,"booking_id":"BK-1"}`))
	})
	x := onlyMismatch(t, auditFile(t, file, nil))
	assert.Equal(t, "rule:small-refunds", x.By)
	assert.Contains(t, x.Problem, `c-1 refund ran {"amount_cents":30000,"booking_id":"BK-1"}`)
	assert.Contains(t, x.Problem, "but rule small-refunds, which let it run, does not allow these arguments: "+
		"the policy decides ask by rule large-refunds for 2 distinct approvers with role finance")
}

// What the request says let a call run is checked too: nothing, a rule
// that does not apply, always_approve in a run that did not ask for it.
func TestExecutedApprovalTampered(t *testing.T) {
	for name, c := range map[string]struct {
		fixture, call string
		change        func(*tool.Request)
		want          string
	}{
		"none": {"policy_quorum.json", "c-1", func(r *tool.Request) { r.Approval = nil },
			"it ran with no approval: a destructive call runs only approved"},
		"a rule": {"policy_quorum.json", "c-1", func(r *tool.Request) {
			r.Approval = &tool.Approval{Approver: "rule:small-refunds", Kind: tool.ApprovedByRule}
		}, "rule small-refunds, which let it run, does not allow these arguments"},
		"a grant that is not there": {"policy_quorum.json", "c-1", func(r *tool.Request) {
			r.Approval = &tool.Approval{Approver: "grant:bob", Note: "g-1", Kind: tool.ApprovedByGrant}
		}, "a grant never answers a quorum"},
		"always_approve under a policy": {"policy_rule.json", "c-3", func(r *tool.Request) {
			r.Approval = &tool.Approval{Approver: "policy:always_approve", Kind: tool.ApprovedByPolicy}
		}, "always_approve let it run, and a run under a policy never approves by itself"},
		"always_approve not asked for": {"approve_v3.json", "c-3", func(r *tool.Request) {
			r.Approval = &tool.Approval{Approver: "policy:always_approve", Kind: tool.ApprovedByPolicy}
		}, `always_approve let it run, and the run was started with approval ""`},
		"the interrupt no approval answers": {"policy_rule.json", "c-3", func(r *tool.Request) { r.Approval.Kind = tool.ApprovedInterrupt },
			"it needed 1 approver with role support approving what ran (the tool's approvers, for its interrupt), and has 0"},
	} {
		file := edit(t, c.fixture, func(h *historypb.History) { editRequest(t, h, c.call, c.change) })
		x := onlyMismatch(t, auditFile(t, file, nil))
		assert.Equal(t, c.call, x.CallID, name)
		assert.Contains(t, x.Problem, c.want, name)
	}
}

// always_approve lets a call run in a run that asked for it on a worker
// that allows it, and nowhere else.
func TestExecutedAlwaysApprove(t *testing.T) {
	auto := func(allow bool) string {
		return edit(t, "approve_v3.json", func(h *historypb.History) {
			editRequest(t, h, "c-3", func(r *tool.Request) {
				r.Approval = &tool.Approval{Approver: "policy:always_approve", Kind: tool.ApprovedByPolicy}
			})
			editInput(t, h, func(in map[string]any) { in["approval"] = workflows.PolicyAlwaysApprove })
			editConfig(t, h, func(c *workflows.WorkerConfig) { c.AllowAutoApprove = allow })
		})
	}
	rep := auditFile(t, auto(true), nil)
	assert.Equal(t, []string{"c-3 close_ticket policy:always_approve: approval always_approve (the run asked for it; the worker allows it)"}, executions(rep))
	x := onlyMismatch(t, auditFile(t, auto(false), nil))
	assert.Contains(t, x.Problem, "the worker's recorded config does not allow it (no --allow-auto-approve)")
}

// Without a policy, the approval's args_digest is what ran.
func TestExecutedUnsignedTampered(t *testing.T) {
	file := edit(t, "approve_v3.json", func(h *historypb.History) { editRequest(t, h, "c-3", setArgs(`{"ticket_id":"TKT-4"}`)) })
	x := onlyMismatch(t, auditFile(t, file, nil))
	assert.Contains(t, x.Problem, `c-3 close_ticket ran {"ticket_id":"TKT-4"}`)
	assert.Contains(t, x.Problem, "what was approved: alice approved digest f5865f5db9f9…")

	// the tool's own interrupt: each round is matched to its own approval
	file = edit(t, "interrupt_v3.json", func(h *historypb.History) {
		n := 0
		for _, ev := range h.Events {
			if s := ev.GetActivityTaskScheduledEventAttributes(); s != nil {
				if n++; n == 2 {
					p := s.GetInput().GetPayloads()[0]
					p.Data = []byte(strings.Replace(string(p.Data), `"nights":2`, `"nights":20`, 1))
				}
			}
		}
	})
	x = onlyMismatch(t, auditFile(t, file, nil))
	assert.Equal(t, tool.ApprovedInterrupt, x.Kind)
	assert.Contains(t, x.Problem, "what was approved: compliance approved digest f61259021e82…")
}

// A history whose config marker is gone has no tool specs: no executed call
// can be told harmless.
func TestExecutedWithoutSpecs(t *testing.T) {
	file := edit(t, "policy_rule.json", func(h *historypb.History) {
		for _, ev := range h.Events {
			if m := ev.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "LocalActivity" {
				m.Details["data"].Payloads[0].Data = []byte(`{"ActivityType":"something.else"}`)
			}
		}
	})
	rep := auditFile(t, file, nil)
	assert.Equal(t, []string{"c-1 refund rule:small-refunds: MISMATCH", "c-3 close_ticket alice: MISMATCH"}, executions(rep))
	require.Len(t, rep.Mismatches(), 2)
	for _, x := range rep.Mismatches() {
		assert.Contains(t, x.Problem, "the history records no tool specs")
	}
}

// editInput rewrites the run's input.
func editInput(t *testing.T, h *historypb.History, change func(map[string]any)) {
	t.Helper()
	p := h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0]
	var in map[string]any
	require.NoError(t, json.Unmarshal(p.Data, &in))
	change(in)
	p.Data = must(json.Marshal(in))
}

// editConfig rewrites the worker config the run recorded.
func editConfig(t *testing.T, h *historypb.History, change func(*workflows.WorkerConfig)) {
	t.Helper()
	for _, ev := range h.Events {
		m := ev.GetMarkerRecordedEventAttributes()
		if m == nil || m.GetMarkerName() != "LocalActivity" || !strings.Contains(string(m.Details["data"].Payloads[0].Data), workflows.ConfigActivity) {
			continue
		}
		p := m.Details["result"].Payloads[0]
		var c workflows.WorkerConfig
		require.NoError(t, json.Unmarshal(p.Data, &c))
		change(&c)
		p.Data = must(json.Marshal(c))
		return
	}
	t.Fatal("no config marker")
}

// The rules are evaluated as the run's rules version did: a rule that cannot
// be evaluated asks the tool's one approver at version 4 and fails closed to
// the strictest later rule (here a quorum of three) at version 5.
func TestExecutedVersionAware(t *testing.T) {
	pol := clonePolicy(t, fixture(t, "policy_quorum.json", nil).Policy)
	refund := pol.Tools["refund"]
	refund.Rules = []policy.Rule{
		{ID: "goodwill", When: "args.reason == 'goodwill'", Decide: policy.Allow},
		{ID: "large-refunds", When: "args.amount_cents > 20000", Decide: policy.Ask, Approvers: &policy.Approvers{Roles: []string{"finance", "support"}, Count: 3}},
	}
	pol.Tools["refund"] = refund

	rep := fixture(t, "policy_quorum.json", pol)
	assert.Empty(t, rep.Mismatches(), "%q", executions(rep))
	assert.Contains(t, rep.Executions[0].Basis, "approved by bob, carol (needed 1 approver with role finance, failing closed: rule goodwill could not be evaluated (failing closed: ask)")

	file := edit(t, "policy_quorum.json", func(h *historypb.History) { setVersion(t, h, 5) })
	rep = auditFile(t, file, pol)
	x := onlyMismatch(t, rep)
	assert.Contains(t, x.Problem, "it needed 3 distinct approvers with role finance or support approving what ran (failing closed: rule goodwill could not be evaluated")
	assert.Contains(t, x.Problem, "and has 2 (bob, carol)")
}

// A start token of a run of rules version 5 signs its whole input
// (input_digest); older runs' sign their goal.
func TestStartInputDigest(t *testing.T) {
	pub, priv, err := signed.GenerateKey()
	require.NoError(t, err)
	// v5 is policy_quorum at rules version 5, its start re-signed by a dave
	// whose key we hold, over the input change leaves.
	v5 := func(change func(map[string]any), claims func(*signed.Claims), cont ...bool) string {
		return edit(t, "policy_quorum.json", func(h *historypb.History) {
			if len(cont) > 0 {
				defer continued(t, h, "dave", nil)
			}
			setVersion(t, h, 5)
			editConfig(t, h, func(c *workflows.WorkerConfig) {
				dave := c.Policy.Approvers["dave"]
				dave.Key = signed.FormatPublicKey(pub)
				c.Policy.Approvers["dave"] = dave
			})
			var in map[string]any
			p := h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0]
			require.NoError(t, json.Unmarshal(p.Data, &in))
			old, err := signed.Peek(in["request_token"].(string))
			require.NoError(t, err)
			delete(in, "request_token")
			digest, err := workflows.InputDigest(must(json.Marshal(in)))
			require.NoError(t, err)
			c := signed.Claims{Approver: "dave", WorkflowID: old.WorkflowID, Action: signed.ActionStart,
				InputDigest: digest, IssuedAt: old.IssuedAt, Expiry: old.Expiry}
			if claims != nil {
				claims(&c)
			}
			in["request_token"] = must(signed.Sign(priv, c))
			if change != nil {
				change(in)
			}
			p.Data = must(json.Marshal(in))
		})
	}
	rep := auditFile(t, v5(nil, nil), nil)
	assert.True(t, entryBy(t, rep, audit.KindStart, "dave").Verified, entryBy(t, rep, audit.KindStart, "dave").Problem)
	assert.Empty(t, rep.Failed())
	assert.Empty(t, rep.Mismatches())

	// another plan under the same token
	rep = auditFile(t, v5(func(in map[string]any) { in["max_turns"] = 3 }, nil), nil)
	assert.Contains(t, entryBy(t, rep, audit.KindStart, "dave").Problem, "the token signs another input: its input_digest")
	// a token over the goal only does not start a version 5 run
	rep = auditFile(t, v5(nil, func(c *signed.Claims) {
		c.InputDigest, c.GoalDigest = "", workflows.GoalDigest("refund most of BK-2")
	}), nil)
	assert.Contains(t, entryBy(t, rep, audit.KindStart, "dave").Problem, "the token signs no input_digest: a run of rules version 5 starts only with a token over its whole input")
	assert.Len(t, rep.Failed(), 1)

	// a continued run's input is its predecessor's with the carry: the first
	// run of the chain checked input_digest; here only a goal_digest is
	rep = auditFile(t, v5(nil, nil, true), nil)
	assert.True(t, entryBy(t, rep, audit.KindStart, "dave").Verified, entryBy(t, rep, audit.KindStart, "dave").Problem)
	rep = auditFile(t, v5(nil, func(c *signed.Claims) { c.GoalDigest = workflows.GoalDigest("another goal") }, true), nil)
	assert.Contains(t, entryBy(t, rep, audit.KindStart, "dave").Problem, "the token signs another goal")
}

// A tool that runs as a local activity leaves a marker without its input:
// its arguments are the trace's, matched the same way.
func TestExecutedLocalActivity(t *testing.T) {
	local := func(traceArgs string, extraMarker bool) string {
		return edit(t, "policy_rule.json", func(h *historypb.History) {
			markers := localize(t, h, "refund")
			require.Len(t, markers, 1)
			if extraMarker { // a second local refund the trace does not show
				ev := h.Events[len(h.Events)-2]
				ev.EventType, ev.Attributes = markers[0].EventType, markers[0].Attributes
			}
			editTrace(t, h, func(res *workflows.RunResult) {
				for i := range res.Trace {
					if res.Trace[i].CallID == "c-1" && res.Trace[i].Status == workflows.TraceOK {
						res.Trace[i].Args = json.RawMessage(traceArgs)
					}
				}
				// a refund refused before it ran (no approval, no run)
				res.Trace = append(res.Trace, workflows.TraceRecord{CallID: "c-9", Tool: "refund", Args: json.RawMessage(`{"amount_cents":-1}`),
					Status: workflows.TraceError, Error: "arguments break the schema"})
			})
		})
	}
	rep := auditFile(t, local(`{"amount_cents":2500,"booking_id":"BK-1"}`, false), nil)
	require.Empty(t, rep.Mismatches(), "%q", executions(rep))
	var refunds []audit.Execution
	for _, x := range rep.Executions {
		if x.Tool == "refund" {
			refunds = append(refunds, x)
		}
	}
	require.Len(t, refunds, 1)
	assert.True(t, refunds[0].Local)
	assert.Equal(t, "rule small-refunds allows these arguments (a local activity: its arguments as the trace records them)", refunds[0].Basis)

	x := onlyMismatch(t, auditFile(t, local(`{"amount_cents":30000,"booking_id":"BK-1"}`, false), nil))
	assert.True(t, x.Local)
	assert.Contains(t, x.Problem, `c-1 refund ran {"amount_cents":30000,"booking_id":"BK-1"} (a local activity: its arguments as the trace records them)`)
	assert.Contains(t, x.Problem, "rule small-refunds, which let it run, does not allow these arguments")

	rep = auditFile(t, local(`{"amount_cents":2500,"booking_id":"BK-1"}`, true), nil)
	assert.Empty(t, rep.Mismatches())
	var untied []string
	for _, x := range rep.Executions {
		if x.Unbound {
			untied = append(untied, x.Problem)
		}
	}
	assert.Equal(t, []string{"2 local activities of destructive tool refund ran and the trace in this history shows 1 runs of it: " +
		"a local activity's marker does not record its arguments, so the rest cannot be tied to what let them run (a retried attempt leaves a marker too)"}, untied)

	// an edit and a grant; a gate and the tool's own interrupt
	for name, c := range map[string]struct {
		tool  string
		kinds []tool.DecisionKind
	}{
		"policy_edit.json":  {"refund", []tool.DecisionKind{tool.ApprovedAtGate, tool.ApprovedByGrant}},
		"interrupt_v3.json": {"book_hotel", []tool.DecisionKind{tool.ApprovedAtGate, tool.ApprovedInterrupt}},
	} {
		rep := auditFile(t, edit(t, name, func(h *historypb.History) { require.Len(t, localize(t, h, c.tool), 2) }), nil)
		var kinds []tool.DecisionKind
		for _, x := range rep.Executions {
			assert.True(t, x.Matched && x.Local, "%s: %s %s", name, x.CallID, x.Problem)
			kinds = append(kinds, x.Kind)
		}
		assert.Equal(t, c.kinds, kinds, name)
	}
}

// localize makes a tool of the run a local one: the specs the run recorded
// say so, and its activities become markers without their input.
func localize(t *testing.T, h *historypb.History, name string) []*historypb.HistoryEvent {
	t.Helper()
	editConfig(t, h, func(c *workflows.WorkerConfig) {
		for i := range c.Tools {
			if c.Tools[i].Name == name {
				c.Tools[i].Local = true
			}
		}
	})
	var markers []*historypb.HistoryEvent
	for _, ev := range h.Events {
		s := ev.GetActivityTaskScheduledEventAttributes()
		if s == nil || s.GetActivityType().GetName() != name {
			continue
		}
		ev.EventType = enumspb.EVENT_TYPE_MARKER_RECORDED
		ev.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{
			MarkerName: "LocalActivity",
			Details:    map[string]*commonpb.Payloads{"data": jsonPayloads(t, map[string]any{"ActivityID": "2", "ActivityType": name})},
		}}
		markers = append(markers, ev)
	}
	return markers
}

// editTrace rewrites the trace in the run's result.
func editTrace(t *testing.T, h *historypb.History, change func(*workflows.RunResult)) {
	t.Helper()
	last := h.Events[len(h.Events)-1].GetWorkflowExecutionCompletedEventAttributes().GetResult().GetPayloads()[0]
	var res workflows.RunResult
	require.NoError(t, json.Unmarshal(last.Data, &res))
	change(&res)
	last.Data = must(json.Marshal(res))
}

// findEvent is the event of the update of the given name from approver
// (a token's sub or the payload's approver).
func updateEvent(t *testing.T, h *historypb.History, name, approver string) *historypb.HistoryEvent {
	t.Helper()
	for _, ev := range h.Events {
		u := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes()
		if u == nil || u.GetAcceptedRequest().GetInput().GetName() != name {
			continue
		}
		var in struct {
			Approver string `json:"approver"`
			Token    string `json:"token"`
		}
		require.NoError(t, json.Unmarshal(u.GetAcceptedRequest().GetInput().GetArgs().GetPayloads()[0].Data, &in))
		if c, err := signed.Peek(in.Token); in.Approver == approver || err == nil && c.Approver == approver {
			return ev
		}
	}
	t.Fatalf("no %s update from %s", name, approver)
	return nil
}

// refuse turns the outcome of an accepted update into a failure, as the
// run answers an update it refuses in its handler.
func refuse(t *testing.T, h *historypb.History, accepted *historypb.HistoryEvent) {
	t.Helper()
	id := accepted.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetProtocolInstanceId()
	for _, ev := range h.Events {
		if c := ev.GetWorkflowExecutionUpdateCompletedEventAttributes(); c != nil && c.GetMeta().GetUpdateId() == id {
			c.Outcome.Value = &updatepb.Outcome_Failure{Failure: &failurepb.Failure{Message: "refused"}}
			return
		}
	}
	t.Fatal("no completion of the update")
}

// A quorum short of what ran needed: an approval that does not verify, one
// the run refused, one by an approver without the role.
func TestExecutedQuorumShort(t *testing.T) {
	const short = "it needed 2 distinct approvers with role finance approving what ran (as rule large-refunds asks), and has 1 (bob)"
	file := edit(t, "policy_quorum.json", func(h *historypb.History) {
		editDecision(t, h, "carol", func(in *workflows.DecisionInput) { in.Token = flipSignature(in.Token) })
	})
	assert.Contains(t, onlyMismatch(t, auditFile(t, file, nil)).Problem, short)

	file = edit(t, "policy_quorum.json", func(h *historypb.History) { refuse(t, h, updateEvent(t, h, workflows.UpdateApprove, "carol")) })
	rep := auditFile(t, file, nil)
	assert.Empty(t, rep.Failed(), "carol's token verifies; the run refused it")
	assert.Contains(t, onlyMismatch(t, rep).Problem, short)

	pol := clonePolicy(t, fixture(t, "policy_quorum.json", nil).Policy)
	carol := pol.Approvers["carol"]
	carol.Roles = []string{"support"}
	pol.Approvers["carol"] = carol
	pub, _, err := signed.GenerateKey()
	require.NoError(t, err)
	pol.Approvers["erin"] = policy.Approver{Key: signed.FormatPublicKey(pub), Roles: []string{"finance"}} // so two of finance can still be met
	assert.Contains(t, onlyMismatch(t, fixture(t, "policy_quorum.json", pol)).Problem, short)
	// and carol's grant cannot let a refund through
	pol = clonePolicy(t, fixture(t, "policy_edit.json", nil).Policy) // its own keys
	pol.Approvers["carol"] = policy.Approver{Key: pol.Approvers["carol"].Key, Roles: []string{"support"}}
	pol.Approvers["erin"] = policy.Approver{Key: signed.FormatPublicKey(pub), Roles: []string{"finance"}}
	assert.Contains(t, onlyMismatch(t, fixture(t, "policy_edit.json", pol)).Problem,
		"grant g-1 by carol let it run, and carol may not decide it (ask by the tool's default for 1 approver with role finance): carol holds [support]")
}

// continued makes a run of a fixture a continued one, its carry naming the
// chain's requester and the worker's config as the config marker has it.
func continued(t *testing.T, h *historypb.History, requestedBy string, grants []workflows.Grant) {
	t.Helper()
	var cfg json.RawMessage
	for _, ev := range h.Events {
		if m := ev.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "LocalActivity" &&
			strings.Contains(string(m.Details["data"].GetPayloads()[0].GetData()), workflows.ConfigActivity) {
			cfg = m.Details["result"].Payloads[0].Data
		}
	}
	require.NotNil(t, cfg)
	start := h.Events[0].GetWorkflowExecutionStartedEventAttributes()
	start.Initiator = enumspb.CONTINUE_AS_NEW_INITIATOR_WORKFLOW
	editInput(t, h, func(in map[string]any) {
		in["carry"] = map[string]any{"config": cfg, "requested_by": requestedBy, "grants": grants}
	})
}

// The run's requester decides none of its calls: their approval does not
// count towards the quorum, and their grant lets nothing through.
func TestExecutedSelfApproval(t *testing.T) {
	// bob, with a key the test holds, signs the start and (again) his approval
	file := edit(t, "policy_quorum.json", func(h *historypb.History) {
		pub, priv, err := signed.GenerateKey()
		require.NoError(t, err)
		editConfig(t, h, func(c *workflows.WorkerConfig) {
			c.Policy.Approvers["bob"] = policy.Approver{Key: signed.FormatPublicKey(pub), Roles: c.Policy.Approvers["bob"].Roles}
		})
		editDecision(t, h, "bob", func(in *workflows.DecisionInput) {
			c, err := signed.Peek(in.Token)
			require.NoError(t, err)
			in.Token = must(signed.Sign(priv, c))
		})
		editInput(t, h, func(in map[string]any) {
			c, err := signed.Peek(in["request_token"].(string))
			require.NoError(t, err)
			c.Approver = "bob"
			in["request_token"] = must(signed.Sign(priv, c))
		})
	})
	rep := auditFile(t, file, nil)
	assert.Empty(t, rep.Failed(), "every token verifies")
	x := onlyMismatch(t, rep)
	assert.Contains(t, x.Problem, "it needed 2 distinct approvers with role finance approving what ran (as rule large-refunds asks), and has 1 (carol)")

	file = edit(t, "policy_edit.json", func(h *historypb.History) { continued(t, h, "carol", nil) })
	x = onlyMismatch(t, auditFile(t, file, nil))
	assert.Equal(t, "c-2", x.CallID)
	assert.Contains(t, x.Problem, "grant g-1 is by carol, who requested the run and may let none of its calls through")
}

// Only approvals given after the call's previous round and before it ran
// let it run.
func TestExecutedApprovalWindow(t *testing.T) {
	file := edit(t, "policy_rule.json", func(h *historypb.History) { updateEvent(t, h, workflows.UpdateApprove, "alice").EventId = 30 })
	x := onlyMismatch(t, auditFile(t, file, nil))
	assert.Equal(t, "c-3", x.CallID)
	assert.Contains(t, x.Problem, "what was approved: no applied approval of c-3 in this history came before it ran")

	// the interrupt's approval, moved before the call's first round, does not
	// answer the second
	file = edit(t, "interrupt_v3.json", func(h *historypb.History) { updateEvent(t, h, workflows.UpdateApprove, "compliance").EventId = 15 })
	x = onlyMismatch(t, auditFile(t, file, nil))
	assert.Equal(t, tool.ApprovedInterrupt, x.Kind)
	assert.Contains(t, x.Problem, "no applied approval of c-1 in this history came before it ran")
}

// For arguments a rule denies, no approval lets the call run.
func TestExecutedDeniedArguments(t *testing.T) {
	file := edit(t, "policy_edit.json", func(h *historypb.History) {
		editRequest(t, h, "c-1", setArgs(`{"amount_cents":8000,"booking_id":"BK-1","reason":"a test"}`))
	})
	x := onlyMismatch(t, auditFile(t, file, nil))
	assert.Contains(t, x.Problem, "for what ran the policy decides deny by rule no-test-refunds: no approval lets such a call run")
}

// From rules version 5 an edit never needs fewer approvers than the call as
// proposed: bob's edit of a call a rule puts to two of finance, approved by
// him alone, does not match.
func TestExecutedEditNeedsTheProposedQuorum(t *testing.T) {
	pol := clonePolicy(t, fixture(t, "policy_edit.json", nil).Policy)
	refund := pol.Tools["refund"]
	refund.Rules[1].When = "args.amount_cents > 8500" // large-refunds: the 9,000 proposed, not the 8,000 edit
	pol.Tools["refund"] = refund
	assert.Empty(t, fixture(t, "policy_edit.json", pol).Mismatches(), "version 4 took the edit's own need")

	file := edit(t, "policy_edit.json", func(h *historypb.History) { setVersion(t, h, 5) })
	x := onlyMismatch(t, auditFile(t, file, pol))
	assert.Equal(t, "c-1", x.CallID)
	assert.Contains(t, x.Problem, "it needed 2 distinct approvers with role finance approving what ran (as the tool's default asks; 2 as the call was proposed, before its edit), and has 1 (bob)")
}

// Against a policy given for a history that records none, every call the
// policy holds back needed a signed decision: the unsigned approval and the
// read a rule asks about do not match.
func TestExecutedPolicyGivenHistoryRecordsNone(t *testing.T) {
	pol := clonePolicy(t, fixture(t, "policy_rule.json", nil).Policy)
	pol.Tools["search_tickets"] = policy.Tool{Rules: []policy.Rule{{ID: "pii", When: "true", Decide: policy.Ask}}}
	rep := fixture(t, "approve_v3.json", pol)
	assert.False(t, rep.Recorded)
	assert.Equal(t, []string{"c-1 search_tickets : MISMATCH", "c-3 close_ticket alice: MISMATCH"}, executions(rep))
	assert.Contains(t, rep.Executions[0].Problem, "it ran with no approval, yet for these arguments the policy decides ask by rule pii for 1 approver")
	assert.Contains(t, rep.Executions[1].Problem, "it needed 1 approver with role support approving what ran (as the tool's default asks), and has 0; what was approved: no applied approval")
}

// A carry in the input of a run that AgentRun did not continue (a cron
// schedule's next run, a retry, a client's start) is not the chain's: its
// config is not taken.
func TestExecutedForgedCarry(t *testing.T) {
	forged := func(initiator enumspb.ContinueAsNewInitiator) string {
		return edit(t, "approve_v3.json", func(h *historypb.History) {
			editConfig(t, h, func(c *workflows.WorkerConfig) { c.AllowAutoApprove = true })
			continued(t, h, "", nil)
			h.Events[0].GetWorkflowExecutionStartedEventAttributes().Initiator = initiator
			for _, ev := range h.Events { // the continued run records no config of its own
				if m := ev.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "LocalActivity" {
					m.Details["data"].Payloads[0].Data = []byte(`{"ActivityType":"toolgate.chain"}`)
				}
			}
			editInput(t, h, func(in map[string]any) { in["approval"] = workflows.PolicyAlwaysApprove })
			editRequest(t, h, "c-3", func(r *tool.Request) {
				r.Approval = &tool.Approval{Approver: "policy:always_approve", Kind: tool.ApprovedByPolicy}
			})
		})
	}
	rep := auditFile(t, forged(enumspb.CONTINUE_AS_NEW_INITIATOR_WORKFLOW), nil)
	assert.Empty(t, rep.Mismatches(), "continued by AgentRun: the carry is the chain's %q", executions(rep))

	rep = auditFile(t, forged(enumspb.CONTINUE_AS_NEW_INITIATOR_CRON_SCHEDULE), nil)
	assert.Contains(t, strings.Join(rep.Notes, "\n"), "the run was started by CronSchedule, not continued as new by AgentRun")
	require.NotEmpty(t, rep.Mismatches())
	for _, x := range rep.Mismatches() {
		assert.Contains(t, x.Problem, "the history records no tool specs")
	}
}

// resign gives approver a key the test holds (in the config the run
// recorded) and signs their grant again, its claims changed by change.
func resign(t *testing.T, h *historypb.History, approver string, change func(*signed.Claims)) ed25519.PrivateKey {
	t.Helper()
	pub, priv, err := signed.GenerateKey()
	require.NoError(t, err)
	editConfig(t, h, func(c *workflows.WorkerConfig) {
		a := c.Policy.Approvers[approver]
		a.Key = signed.FormatPublicKey(pub)
		c.Policy.Approvers[approver] = a
	})
	p := updateEvent(t, h, workflows.UpdateGrant, approver).GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetArgs().GetPayloads()[0]
	var in workflows.TokenInput
	require.NoError(t, json.Unmarshal(p.Data, &in))
	c, err := signed.Peek(in.Token)
	require.NoError(t, err)
	if change != nil {
		change(&c)
	}
	in.Token = must(signed.Sign(priv, c))
	p.Data = must(json.Marshal(in))
	return priv
}

// The grant a call passed by must hold when the call ran: made before it,
// for its tool, not past its end, its uses or a revocation; and no grant
// answers a verdict reached by failing closed. One the chain's previous
// run made is checked against its condition, and is otherwise not tied.
func TestExecutedGrantChecks(t *testing.T) {
	check := func(name string, change func(*historypb.History), pol *policy.Policy, call, want string) {
		t.Helper()
		rep := auditFile(t, edit(t, "policy_edit.json", change), pol)
		var got []string
		for _, x := range rep.Mismatches() {
			if x.CallID == call {
				got = append(got, x.Problem)
			}
		}
		require.Len(t, got, 1, "%s: %q", name, executions(rep))
		assert.Contains(t, got[0], want, name)
	}
	check("re-signed, untouched", func(h *historypb.History) {
		resign(t, h, "carol", nil)
		editRequest(t, h, "c-2", setArgs(`{"amount_cents":9000,"booking_id":"BK-1"}`))
	}, nil, "c-2", "grant g-1 by carol lets refund through only when args.amount_cents <= 5000") // the key swap itself is sound
	check("made after", func(h *historypb.History) { updateEvent(t, h, workflows.UpdateGrant, "carol").EventId = 40 }, nil,
		"c-2", "grant g-1 was made after the call ran")
	check("for another tool", func(h *historypb.History) {
		resign(t, h, "carol", func(c *signed.Claims) { c.Grant.Tool = "close_ticket" })
	}, nil, "c-2", "grant g-1 is carol's for close_ticket, not carol's for refund")
	check("ended", func(h *historypb.History) {
		resign(t, h, "carol", func(c *signed.Claims) { c.Grant.Until = c.IssuedAt + 1 })
	}, nil, "c-2", "before the call ran")
	check("used up", func(h *historypb.History) {
		editRequest(t, h, "c-1", func(r *tool.Request) {
			r.Approval = &tool.Approval{Approver: "grant:carol", Note: "g-1", Kind: tool.ApprovedByGrant}
		})
	}, nil, "c-2", "grant g-1 allows 1 uses, and this call is its use 2")
	check("revoked", func(h *historypb.History) {
		priv := resign(t, h, "carol", nil)
		revoke := must(signed.Sign(priv, signed.Claims{Approver: "carol", WorkflowID: "fixture-policy_edit", Action: signed.ActionRevoke,
			GrantID: "g-1", IssuedAt: 1, Expiry: 2}))
		var accepted, completed *historypb.HistoryEvent // two events between c-1 and c-2 the audit has no use for
		for _, ev := range h.Events {
			switch ev.EventId {
			case 26:
				accepted = ev
			case 27:
				completed = ev
			}
		}
		accepted.EventType = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
		accepted.Attributes = &historypb.HistoryEvent_WorkflowExecutionUpdateAcceptedEventAttributes{WorkflowExecutionUpdateAcceptedEventAttributes: &historypb.WorkflowExecutionUpdateAcceptedEventAttributes{
			ProtocolInstanceId: "revoke-1",
			AcceptedRequest: &updatepb.Request{Meta: &updatepb.Meta{UpdateId: "revoke-1"},
				Input: &updatepb.Input{Name: workflows.UpdateRevoke, Args: jsonPayloads(t, workflows.TokenInput{Token: revoke})}},
		}}
		completed.EventType = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED
		completed.Attributes = &historypb.HistoryEvent_WorkflowExecutionUpdateCompletedEventAttributes{WorkflowExecutionUpdateCompletedEventAttributes: &historypb.WorkflowExecutionUpdateCompletedEventAttributes{
			Meta:    &updatepb.Meta{UpdateId: "revoke-1"},
			Outcome: &updatepb.Outcome{Value: &updatepb.Outcome_Success{Success: jsonPayloads(t, map[string]any{"grant": map[string]any{"id": "g-1"}})}},
		}}
	}, nil, "c-2", "grant g-1 was revoked by carol before the call ran")

	// at rules version 5, a rule that cannot be evaluated fails closed, and
	// a grant never answers that
	pol := clonePolicy(t, fixture(t, "policy_edit.json", nil).Policy)
	refund := pol.Tools["refund"]
	refund.Rules = append([]policy.Rule{{ID: "goodwill", When: "args.reason == 'goodwill'", Decide: policy.Allow}}, refund.Rules...)
	pol.Tools["refund"] = refund
	assert.Empty(t, fixture(t, "policy_edit.json", pol).Mismatches(), "version 4 failed at the first error: an ask a grant answered")
	check("failed closed", func(h *historypb.History) { setVersion(t, h, 5) }, pol,
		"c-2", "a grant never answers a verdict reached by failing closed")

	// a grant handed over by the chain's previous run (its token is in that
	// run's history)
	carried := []workflows.Grant{{ID: "g-1", Tool: "refund", When: "args.amount_cents <= 5000", Uses: 1, By: "carol"}}
	asCarried := func(args string) string {
		return edit(t, "policy_edit.json", func(h *historypb.History) {
			continued(t, h, "", carried)
			u := updateEvent(t, h, workflows.UpdateGrant, "carol").GetWorkflowExecutionUpdateAcceptedEventAttributes()
			u.AcceptedRequest.Input.Name = "not-a-grant" // this run made none
			editRequest(t, h, "c-2", setArgs(args))
			last := h.Events[len(h.Events)-1].GetWorkflowExecutionCompletedEventAttributes().GetResult().GetPayloads()[0]
			last.Data = []byte(strings.ReplaceAll(string(last.Data), `"amount_cents":5000`, strings.TrimPrefix(strings.TrimSuffix(args, `,"booking_id":"BK-1"}`), "{")))
		})
	}
	rep := auditFile(t, asCarried(`{"amount_cents":4000,"booking_id":"BK-1"}`), nil)
	assert.Empty(t, rep.Mismatches(), "%q", executions(rep))
	x := rep.Executions[1]
	assert.True(t, x.Unbound)
	assert.Contains(t, x.Problem, "grant g-1 by carol (refund when args.amount_cents <= 5000), answering ask by the tool's default for 1 approver with role finance was made in an earlier run of the chain")
	x = onlyMismatch(t, auditFile(t, asCarried(`{"amount_cents":6000,"booking_id":"BK-1"}`), nil))
	assert.Contains(t, x.Problem, "grant g-1 by carol lets refund through only when args.amount_cents <= 5000, and these arguments do not match it")
	// the grant the previous run handed over is bob's, not carol's
	carried[0].By = "bob"
	x = onlyMismatch(t, auditFile(t, asCarried(`{"amount_cents":4000,"booking_id":"BK-1"}`), nil))
	assert.Contains(t, x.Problem, "no grant g-1 by carol for refund in this history, nor handed over by the chain's previous run")
}

// A continued run may run a call approved (in part) in an earlier run of its
// chain, whose history holds those approvals: a quorum short here is not
// tied either way, unless an approval here signs other arguments.
func TestExecutedContinuedRun(t *testing.T) {
	file := edit(t, "policy_quorum.json", func(h *historypb.History) {
		continued(t, h, "dave", nil)
		updateEvent(t, h, workflows.UpdateApprove, "bob").GetWorkflowExecutionUpdateAcceptedEventAttributes().AcceptedRequest.Input.Name = "elsewhere"
	})
	rep := auditFile(t, file, nil)
	assert.Empty(t, rep.Mismatches())
	require.Len(t, rep.Executions, 1)
	x := rep.Executions[0]
	assert.True(t, x.Unbound)
	assert.Contains(t, x.Problem, "and this history has 1 (carol): the run continued its chain, and approvals given in an earlier run of it are in that run's history")

	file = edit(t, "policy_quorum.json", func(h *historypb.History) {
		continued(t, h, "dave", nil)
		editRequest(t, h, "c-1", setArgs(`{"amount_cents":4000000,"booking_id":"BK-2"}`))
	})
	x = onlyMismatch(t, auditFile(t, file, nil))
	assert.Contains(t, x.Problem, "and has 0; what was approved: bob approved digest 5047d101fb25…")

	// what the trace approved is checked all the same
	file = edit(t, "policy_quorum.json", func(h *historypb.History) {
		continued(t, h, "dave", nil)
		updateEvent(t, h, workflows.UpdateApprove, "bob").GetWorkflowExecutionUpdateAcceptedEventAttributes().AcceptedRequest.Input.Name = "elsewhere"
		updateEvent(t, h, workflows.UpdateApprove, "carol").GetWorkflowExecutionUpdateAcceptedEventAttributes().AcceptedRequest.Input.Name = "elsewhere"
		editRequest(t, h, "c-1", setArgs(`{"amount_cents":4000000,"booking_id":"BK-2"}`))
	})
	x = onlyMismatch(t, auditFile(t, file, nil))
	assert.Contains(t, x.Problem, `the run's trace records c-1 approved (by bob, carol) with other arguments: {"amount_cents":30000,"booking_id":"BK-2"}`)

	// the chain's requester is its carry's, not the start token's its input
	// still holds (the first run of the chain checked that one)
	file = edit(t, "policy_quorum.json", func(h *historypb.History) { continued(t, h, "bob", nil) })
	rep = auditFile(t, file, nil)
	require.Len(t, rep.Executions, 1)
	assert.True(t, rep.Executions[0].Unbound)
	assert.Contains(t, rep.Executions[0].Problem, "and this history has 1 (carol)")

	// without a policy, the same
	file = edit(t, "approve_v3.json", func(h *historypb.History) {
		continued(t, h, "", nil)
		updateEvent(t, h, workflows.UpdateApprove, "alice").GetWorkflowExecutionUpdateAcceptedEventAttributes().AcceptedRequest.Input.Name = "elsewhere"
	})
	rep = auditFile(t, file, nil)
	assert.Empty(t, rep.Mismatches())
	require.Len(t, rep.Executions, 1)
	assert.True(t, rep.Executions[0].Unbound)
	assert.Contains(t, rep.Executions[0].Problem, "no approval of it is in this history: the run continued its chain")
}

// The rule decisions of the trace are evaluated as the run's rules version
// did too: a rule before no-test-refunds that cannot be evaluated asks at
// version 4, and at version 5 fails closed to the deny that follows it.
func TestTraceRuleVersionAware(t *testing.T) {
	pol := clonePolicy(t, fixture(t, "policy_rule.json", nil).Policy)
	refund := pol.Tools["refund"]
	refund.Rules = append([]policy.Rule{{ID: "broken", When: "args.nope == 1", Decide: policy.Ask}}, refund.Rules...)
	pol.Tools["refund"] = refund

	e := entryBy(t, fixture(t, "policy_rule.json", pol), audit.KindRule, "rule:no-test-refunds")
	assert.False(t, e.Verified)
	assert.Contains(t, e.Problem, "the policy decides ask (rule broken) for these arguments, not deny by rule no-test-refunds")

	file := edit(t, "policy_rule.json", func(h *historypb.History) { setVersion(t, h, 5) })
	e = entryBy(t, auditFile(t, file, pol), audit.KindRule, "rule:no-test-refunds")
	assert.True(t, e.Verified, e.Problem)
}

// A tool's activity whose input is no tool request, or whose arguments have
// no canonical form (a key given twice), cannot be matched to anything: it
// fails the audit.
func TestExecutedUnreadableRequest(t *testing.T) {
	file := edit(t, "policy_rule.json", func(h *historypb.History) {
		for _, ev := range h.Events {
			if s := ev.GetActivityTaskScheduledEventAttributes(); s != nil && s.GetActivityType().GetName() == "refund" {
				s.Input.Payloads[0].Data = []byte(`"not a request"`)
			}
		}
	})
	x := onlyMismatch(t, auditFile(t, file, nil))
	assert.Contains(t, x.Problem, "tool refund's activity does not hold a tool request")

	file = edit(t, "policy_rule.json", func(h *historypb.History) {
		editRequest(t, h, "c-1", setArgs(`{"amount_cents":2500,"amount_cents":4000000}`))
	})
	x = onlyMismatch(t, auditFile(t, file, nil))
	assert.Contains(t, x.Problem, "c-1 refund ran arguments that cannot be digested, so no approval can name them")
}
