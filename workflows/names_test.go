package workflows_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// This file tests the names a decision may give its approver (rules
// version 12): names that do not read as they are written, look-alikes of
// the names the run writes itself, and the doors' names sent by anyone but
// their door are refused, saying why; the call still waits, and an honest
// decision after them is taken.

// doorLinks are links the run's deliveries report as sent for each wait: a
// Slack message's (to channel "team") and a webhook's (target "ops").
var doorLinks = []workflows.LinkProof{sentLink("team-slack", "team", "slack"), sentLink("hook-secret", "ops", "webhook")}

// named is an approval of callID as approver, for the arguments state shows.
func (f *fixture) named(approver, callID string, edit func(*workflows.DecisionInput)) *updateOutcome {
	in := workflows.DecisionInput{CallID: callID, Approver: approver, ArgsDigest: f.digest(callID)}
	if edit != nil {
		edit(&in)
	}
	return f.update(workflows.UpdateApprove, in)
}

func via(channel, link string) func(*workflows.DecisionInput) {
	return func(in *workflows.DecisionInput) { in.Via, in.Link = channel, link }
}

// Each look-alike of a name the run or a door writes, and each name that
// does not read as written, is refused with why; the call still waits, and
// an honest approval afterwards runs it.
func TestLookAlikeApproversAreRefused(t *testing.T) {
	f := newFixture(t, withNotifier(&notifier{targets: []workflows.NotifyTarget{target("ops", workflows.NotifyWaiting)}, links: doorLinks}))
	cases := []struct {
		name string
		edit func(*workflows.DecisionInput)
		want []string
	}{
		{"ｒule:x", nil, []string{`approver "ｒule:x" refused: U+FF52 'ｒ' at byte 0 is changed by NFKC normalization (the name normalizes to "rule:x")`}},
		{"гrant:bob", nil, []string{`approver "гrant:bob" refused: the word "гrant" mixes scripts: Cyrillic (U+0433 'г' at byte 0), Latin (U+0072 'r' at byte 2)`}},
		{"ru\u200ble:x", nil, []string{`approver "ru\u200ble:x" refused: U+200B (zero-width space) at byte 2 is a format character`}},
		{"gr\u200dant:bob", nil, []string{"U+200D (zero-width joiner) at byte 2 is a format character"}},
		{"\u202ealice", nil, []string{"U+202E (right-to-left override) at byte 0"}},
		{" alice", nil, []string{"the name starts with a space"}},
		{"RULE:x", nil, []string{`approver "RULE:x" refused: names starting with rule:, grant:, policy: are the run's own`, "spelt with look-alike letters (this one looks like rule:)"}},
		{"роІісу:always_approve", nil, []string{"names starting with rule:, grant:, policy: are the run's own", "(this one looks like policy:)"}},
		{"ρolicy:x", nil, []string{`the word "ρolicy" mixes scripts: Greek (U+03C1 'ρ' at byte 0), Latin`}},
		{"(caller)", nil, []string{`approver "(caller)" refused: (caller) is who the run records for a call its caller withdrew (the withdraw update), so no decision may take it`}},
		{"(CALLER)", nil, []string{"(caller) is who the run records for a call its caller withdrew"}},
		{"（caller）", nil, []string{"U+FF08 '（' at byte 0 is changed by NFKC normalization"}},
		{"Slack:alice", nil, []string{`approver "Slack:alice" refused: it looks like slack:, how a door (MCP elicitation, a webhook's or a Slack message's link) names the person it took a decision from: only that door writes such a name, and exactly as slack:NAME`}},
		{"slack:alice", nil, []string{`approver "slack:alice" refused: slack:NAME is the name of a click that came through slack (via "slack", with the secret of the link the run sent), and this decision's via is ""`}},
		{"slack:alice", via("webhook", "hook-secret"), []string{`this decision's via is "webhook"`}},
		{"slack:", via("slack", "team-slack"), []string{"slack: names no one after it"}},
		{"webhook:ops", nil, []string{`webhook:NAME is the name of a click that came through webhook (via "webhook"`}},
		{"wеbhook:ops", via("webhook", "hook-secret"), []string{"mixes scripts"}},
		{"elicitation:alice", nil, []string{`approver "elicitation:alice" refused: elicitation:NAME is the name of an MCP client's user asked through elicitation about a call it proposed, and this run's planner is "scripted", not "external"`}},
	}
	outs := make([]*updateOutcome, len(cases))
	var honest, second *updateOutcome
	f.at(time.Minute, func() {
		for i, c := range cases {
			outs[i] = f.named(c.name, "c-1", c.edit)
		}
	})
	f.at(2*time.Minute, func() {
		for i, c := range cases {
			require.True(t, outs[i].done, c.name)
			require.Error(t, outs[i].err, c.name)
			require.Equal(t, workflows.RefusedDecision, failureType(t, outs[i].err), c.name)
			for _, w := range c.want {
				require.ErrorContains(t, outs[i].err, w, c.name)
			}
		}
		require.Equal(t, []string{"gate:close_ticket"}, f.next(), "no refused decision changed the call")
		require.Equal(t, workflows.StatusWaitingForApproval, f.state().Status)
		require.Zero(t, f.desk.count("close_ticket"))
		honest = f.named("José", "c-1", nil)
	})
	f.at(3*time.Minute, func() { second = f.named("o'neil", "c-2", nil) })
	// A second call keeps the run alive should a refusal above be taken
	// instead: the checks at 2 minutes then say which.
	res := f.run(scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)), steps(call("close_ticket", `{"ticket_id":"TKT-4"}`))))
	require.NoError(t, honest.err)
	require.NoError(t, second.err)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, 2, f.desk.count("close_ticket"))
	require.Equal(t, []string{"c-1:close_ticket:blocked", "c-1:close_ticket:approved", "c-1:close_ticket:ok",
		"c-2:close_ticket:blocked", "c-2:close_ticket:approved", "c-2:close_ticket:ok"}, statuses(filterNotices(res.Trace)))
	var by []string
	for _, r := range res.Trace {
		if r.Status == workflows.TraceApproved {
			by = append(by, r.Approver)
		}
	}
	require.Equal(t, []string{"José", "o'neil"}, by)
}

// filterNotices is trace without its notification records.
func filterNotices(trace []workflows.TraceRecord) []workflows.TraceRecord {
	var out []workflows.TraceRecord
	for _, r := range trace {
		if r.Status != workflows.TraceNotified && r.Status != workflows.TraceNotifyFailed {
			out = append(out, r)
		}
	}
	return out
}

// A door's own decision keeps its name: a click in Slack (slack:USER, via
// slack, with the Slack link's secret) and on a webhook's link
// (webhook:TARGET, via webhook, with its secret), on a run without a policy.
func TestDoorsDecisionsKeepTheirNames(t *testing.T) {
	f := newFixture(t, withNotifier(&notifier{targets: []workflows.NotifyTarget{target("ops", workflows.NotifyWaiting)}, links: doorLinks}))
	var bySlack, byHook *updateOutcome
	f.at(time.Minute, func() { bySlack = f.named("slack:U123", "c-1", via("slack", "team-slack")) })
	f.at(2*time.Minute, func() { byHook = f.named("webhook:ops", "c-2", via("webhook", "hook-secret")) })
	res := f.run(scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)), steps(call("close_ticket", `{"ticket_id":"TKT-4"}`))))
	require.NoError(t, bySlack.err)
	require.NoError(t, byHook.err)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	var got []string
	for _, r := range res.Trace {
		if r.Status == workflows.TraceApproved {
			got = append(got, r.CallID+" "+r.Approver+" ("+r.Via+")")
		}
	}
	require.Equal(t, []string{"c-1 slack:U123 (slack:U123: slack)", "c-2 webhook:ops (webhook:ops: webhook)"}, got)
}

// elicitation:NAME is taken only as mcpserve sends it: an approval or a
// rejection of a call at the gate, by no link, on a run without a policy
// whose planner is external. Anything else under that name is refused,
// saying why, and the call still waits for it.
func TestElicitationNameOnlyAsMCPServeSendsIt(t *testing.T) {
	f := newFixture(t)
	const closeArgs = `{"ticket_id":"TKT-3"}`
	var digest string
	cases := map[string]*updateOutcome{}
	var good *updateOutcome
	f.at(time.Second, func() { f.propose("close_ticket", closeArgs, "k-1") })
	f.at(2*time.Second, func() {
		digest = f.digest("c-1")
		send := func(name string, edit func(*workflows.DecisionInput)) *updateOutcome {
			in := workflows.DecisionInput{CallID: "c-1", Approver: "elicitation:alice", ArgsDigest: digest, Kind: workflows.KindGate}
			edit(&in)
			return f.update(workflows.UpdateApprove, in)
		}
		cases["Elicitation:alice"] = send("", func(in *workflows.DecisionInput) { in.Approver = "Elicitation:alice" })
		cases["by link"] = send("", func(in *workflows.DecisionInput) { in.Via, in.Link = "slack", "team-slack" })
		cases["an edit"] = send("", func(in *workflows.DecisionInput) { in.EditedArgs = json.RawMessage(`{"ticket_id":"TKT-4"}`) })
		cases["an interrupt's kind"] = send("", func(in *workflows.DecisionInput) { in.Kind = workflows.KindInterrupt })
		cases["a response"] = f.update(workflows.UpdateRespond, workflows.DecisionInput{CallID: "c-1", Approver: "elicitation:alice", ArgsDigest: digest, Response: json.RawMessage(`{"ok":true}`)})
	})
	f.at(3*time.Second, func() {
		for name, want := range map[string]string{
			"Elicitation:alice":   "it looks like elicitation:",
			"by link":             `elicitation:NAME is the name of an MCP client's user asked through elicitation, which comes by no link (this decision's via is "slack")`,
			"an edit":             "who approves or rejects the call as it is: no edit, answer, response or cancel",
			"an interrupt's kind": `which asks only the gate's question, never a tool's own (kind "interrupt")`,
			"a response":          "who approves or rejects the call as it is",
		} {
			require.True(t, cases[name].done, name)
			require.ErrorContains(t, cases[name].err, want, name)
			require.Equal(t, workflows.RefusedDecision, failureType(t, cases[name].err), name)
		}
		require.Equal(t, []string{"gate:close_ticket"}, f.next())
		good = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-1", Approver: "elicitation:alice", ArgsDigest: digest, Kind: workflows.KindGate,
			Note: "approved by alice's user, asked through MCP elicitation"})
	})
	f.at(4*time.Second, func() { f.env.SignalWorkflow(workflows.SignalEnd, nil) })
	res := f.run(external())
	require.NoError(t, good.err)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, []string{"c-1:close_ticket:blocked", "c-1:close_ticket:approved", "c-1:close_ticket:ok"}, statuses(res.Trace))
	require.Equal(t, "elicitation:alice", res.Trace[1].Approver)
}

// Under a policy no door writes a name of its own (a click is signed as the
// approver the policy names; mcpserve never asks by elicitation): each door
// form is refused as such, before its missing signature; the call still
// waits, and bob's signed rejection afterwards decides it.
func TestDoorNamesRefusedUnderAPolicy(t *testing.T) {
	s := newSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	var elicited, slack, good *updateOutcome
	f.at(time.Minute, func() {
		elicited = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-1", Approver: "elicitation:alice", ArgsDigest: f.digest("c-1")})
		slack = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-1", Approver: "slack:bob", ArgsDigest: f.digest("c-1"), Via: "slack", Link: "x"})
	})
	f.at(2*time.Minute, func() {
		for _, o := range []*updateOutcome{elicited, slack} {
			require.True(t, o.done)
			require.ErrorContains(t, o.err, "names starting with elicitation:, webhook:, slack: are written by a door only on a run without a policy; under this run's policy every decision is signed")
			require.Equal(t, workflows.RefusedDecision, failureType(t, o.err))
		}
		require.Equal(t, workflows.StatusWaitingForApproval, f.state().Status)
		require.Equal(t, []string{"gate:refund"}, f.next())
		good = s.decide(f, "bob", signed.ActionReject, "c-1", nil)
	})
	res := f.run(scripted(steps(refundCall(9000, ""))))
	require.NoError(t, good.err)
	last := res.Trace[len(res.Trace)-1]
	require.Equal(t, workflows.TraceRejected, last.Status)
	require.Equal(t, "bob", last.Approver)
	require.Empty(t, f.desk.payments)
}

// A rewind note without a policy names who rewound the run as they say: a
// name that does not read as written, or looks like a name the run or a
// door writes, is refused.
func TestRewindersNameIsChecked(t *testing.T) {
	f := newFixture(t)
	preview, reset := strings.Repeat("ab", 32), strings.Repeat("0f", 16)
	note := func(by string) workflows.RewindNote {
		return workflows.RewindNote{CallID: "c-1", Tool: "close_ticket", Step: 1, BaseRunID: "run-1", Event: 4, Preview: preview, By: by, Reset: reset}
	}
	f.at(time.Minute, func() {
		by, err := f.checkRewind(note("Борис Smith"))
		require.NoError(t, err)
		require.Equal(t, "Борис Smith", by)
		for by, want := range map[string]string{
			"ｒule:x":            `rewind note refused: by "ｒule:x": U+FF52 'ｒ' at byte 0 is changed by NFKC normalization`,
			"ali\u200bce":       "U+200B (zero-width space)",
			"RULE:x":            `rewind note refused: by "RULE:x" looks like rule:`,
			"(caller)":          "looks like (caller)",
			"slack:alice":       "looks like slack:",
			"elicitation:alice": "looks like elicitation:",
		} {
			_, err := f.checkRewind(note(by))
			require.ErrorContains(t, err, want, by)
		}
		f.approve("c-1")
	})
	res := f.run(scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`))))
	require.Equal(t, workflows.StatusCompleted, res.Status)
}
