package workflows_test

import (
	"crypto/ed25519"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// guardPolicy is testPolicy's approvers with fleet guards over refund and
// close_ticket, and operators (who may pause a tool).
const guardPolicy = `
approvers:
  alice: {key: "%s", roles: [support, ops]}
  bob:   {key: "%s", roles: [finance]}
  carol: {key: "%s", roles: [finance]}
operators: [ops]
tools:
  close_ticket:
    approvers: {roles: [support]}
  refund:
    rules:
      - {id: small-refunds, when: "args.amount_cents <= 5000", decide: allow}
    approvers: {roles: [finance]}
guards:
  - {id: refund-budget, kind: budget, tools: [refund], amount: "args.amount_cents", limit: 10000, window: 1h, reason: "refunds are capped at 100.00 an hour"}
  - {id: refund-loop, kind: repeat, tools: [refund], limit: 2, window: 10m}
  - {id: big-refunds, kind: rate, tools: [refund], limit: 3, window: 1h, exceed: ask, approvers: {roles: [finance], count: 1}}
`

func guardSigners(t *testing.T) *signers {
	s := newSigners(t)
	var pubs []any
	for _, name := range []string{"alice", "bob", "carol"} {
		pubs = append(pubs, signed.FormatPublicKey(s.keys[name].Public().(ed25519.PublicKey)))
	}
	p, err := policy.Parse([]byte(fmt.Sprintf(guardPolicy, pubs...)))
	require.NoError(t, err)
	s.policy = p
	return s
}

func refundOn(booking string, cents int) tool.Proposal {
	return call("refund", fmt.Sprintf(`{"booking_id":%q,"amount_cents":%d}`, booking, cents))
}

func byCall(trace []workflows.TraceRecord) map[string][]workflows.TraceRecord {
	out := map[string][]workflows.TraceRecord{}
	for _, rec := range trace {
		out[rec.CallID] = append(out[rec.CallID], rec)
	}
	return out
}

func budgetUse(t *testing.T, m *ledger.Memory, guard string) (committed, reserved int64) {
	t.Helper()
	for _, g := range m.View().Guards {
		if g.ID == guard {
			for _, s := range g.Scopes {
				committed += s.Committed
				reserved += s.Reserved
			}
		}
	}
	return committed, reserved
}

// A budget counts what ran, across calls: a refund that would take the sum
// past the limit is denied, with the guard's reason told to the planner,
// and a smaller one after it still fits.
func TestBudgetGuardDeniesPastItsLimit(t *testing.T) {
	s := guardSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	res := f.run(scripted(
		steps(refundCall(3000, "")),
		steps(refundCall(4000, "")),
		steps(refundCall(5000, "")),
		steps(refundCall(2000, "")),
	))
	calls := byCall(res.Trace)
	require.Len(t, f.desk.payments, 3, "3,000 + 4,000 + 2,000 run; 5,000 would make 12,000")
	require.Equal(t, []string{"reserved", "approved", "ok"}, traceStatuses(calls["c-1"]))
	blocked := calls["c-3"][len(calls["c-3"])-1]
	require.Equal(t, workflows.TraceBlocked, blocked.Status)
	require.Equal(t, "guard:refund-budget", blocked.Rule)
	require.True(t, strings.HasPrefix(blocked.Error, plan.DeniedByLedger), blocked.Error)
	require.Contains(t, blocked.Error, "12,000")
	require.Contains(t, blocked.Error, "refunds are capped at 100.00 an hour")
	committed, reserved := budgetUse(t, f.ledger, "refund-budget")
	require.Equal(t, int64(9000), committed)
	require.Zero(t, reserved)
}

// A call a human rejects gives its reservation back: without the release,
// the second refund (8,000 + 9,000) would not fit the budget.
func TestRejectedCallReleasesItsReservation(t *testing.T) {
	s := guardSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	var rejected, approved *updateOutcome
	f.at(time.Minute, func() {
		_, reserved := budgetUse(t, f.ledger, "refund-budget")
		require.Equal(t, int64(8000), reserved, "reserved while it waits")
		rejected = s.decide(f, "bob", signed.ActionReject, "c-1", nil)
	})
	f.at(2*time.Minute, func() {
		approved = s.decide(f, "bob", signed.ActionApprove, "c-2", nil)
	})
	res := f.run(scripted(steps(refundCall(8000, "")), steps(refundCall(9000, ""))))
	require.NoError(t, rejected.err)
	require.NoError(t, approved.err)
	calls := byCall(res.Trace)
	require.Equal(t, []string{"reserved", "blocked", "rejected", "released"}, traceStatuses(calls["c-1"]))
	require.Equal(t, workflows.TraceOK, calls["c-2"][len(calls["c-2"])-1].Status)
	committed, reserved := budgetUse(t, f.ledger, "refund-budget")
	require.Equal(t, int64(9000), committed)
	require.Zero(t, reserved)
}

// A guard whose exceed is ask holds the call for its approvers; their yes
// lets it past the limit, and it counts.
func TestAskGuardWaitsForItsApprovers(t *testing.T) {
	s := guardSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	var bob *updateOutcome
	f.at(time.Minute, func() {
		st := f.state()
		require.Len(t, st.Interrupts, 1)
		require.Equal(t, "guard:big-refunds", st.Interrupts[0].Rule)
		require.Contains(t, st.Interrupts[0].Reason, "within 1h, over the limit of 3")
		bob = s.decide(f, "bob", signed.ActionApprove, "c-4", nil)
	})
	res := f.run(scripted(
		steps(refundOn("BK-1", 1000)),
		steps(refundOn("BK-2", 1000)),
		steps(refundOn("BK-3", 1000)),
		steps(refundOn("BK-4", 1000)),
	))
	require.NoError(t, bob.err)
	require.Len(t, f.desk.payments, 4)
	require.Equal(t, workflows.TraceOK, byCall(res.Trace)["c-4"][len(byCall(res.Trace)["c-4"])-1].Status)
	committed, _ := budgetUse(t, f.ledger, "big-refunds")
	require.Equal(t, int64(4), committed, "past the limit by approval, and counted")
}

// A looping agent proposing the same call is stopped at the repeat limit.
func TestRepeatLimitStopsALoop(t *testing.T) {
	s := guardSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	res := f.run(scripted(steps(refundCall(500, "")), steps(refundCall(500, "")), steps(refundCall(500, ""))))
	calls := byCall(res.Trace)
	last := calls["c-3"][len(calls["c-3"])-1]
	require.Equal(t, workflows.TraceBlocked, last.Status)
	require.Equal(t, "guard:refund-loop", last.Rule)
	require.Contains(t, last.Error, "3rd time")
	require.Len(t, f.desk.payments, 2)
}

// A pause stops the next call of the tool in the run at its gate, with no
// wait: the planner is told who paused it and why.
func TestPauseRefusesAtTheGate(t *testing.T) {
	s := guardSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	require.NoError(t, f.ledger.Pause(ledger.AllTools, "alice", "INC-9: every write stops"))
	res := f.run(scripted(steps(call("search_tickets", `{"query":"login"}`)), steps(call("close_ticket", `{"ticket_id":"TKT-1"}`))))
	calls := byCall(res.Trace)
	require.Equal(t, workflows.TraceOK, calls["c-1"][0].Status, "a read is not paused by --all")
	require.Equal(t, []string{"blocked"}, traceStatuses(calls["c-2"]))
	require.Contains(t, calls["c-2"][0].Error, "every destructive tool is paused fleet-wide by alice")
	require.Contains(t, calls["c-2"][0].Error, "INC-9")
	require.Zero(t, f.desk.closed["TKT-1"])
}

// A call that waits is checked again when decided: approved during a
// pause, it is refused; the other, approved after the unpause, runs.
func TestPauseRechecksDecisions(t *testing.T) {
	s := guardSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	var first, second, third *updateOutcome
	f.at(time.Minute, func() {
		require.Len(t, f.state().Interrupts, 2)
		require.NoError(t, f.ledger.Pause("close_ticket", "alice", "INC-7: closes the wrong tickets"))
		first = s.decide(f, "alice", signed.ActionApprove, "c-1", nil)
	})
	f.at(2*time.Minute, func() {
		f.ledger.Unpause("close_ticket")
		second = s.decide(f, "alice", signed.ActionApprove, "c-2", nil)
	})
	f.at(3*time.Minute, func() {
		third = s.decide(f, "alice", signed.ActionApprove, "c-3", nil)
	})
	res := f.run(scripted(
		steps(call("close_ticket", `{"ticket_id":"TKT-1"}`), call("close_ticket", `{"ticket_id":"TKT-2"}`)),
		steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)),
	))
	require.NoError(t, first.err, "the approval is taken; the call is refused after it")
	require.NoError(t, second.err)
	require.NoError(t, third.err)
	calls := byCall(res.Trace)
	c1 := calls["c-1"][len(calls["c-1"])-1]
	require.Equal(t, workflows.TraceBlocked, c1.Status, "approved, then refused: paused meanwhile")
	require.Contains(t, c1.Error, "close_ticket is paused fleet-wide by alice")
	require.Contains(t, c1.Error, "INC-7")
	require.Equal(t, workflows.TraceOK, calls["c-2"][len(calls["c-2"])-1].Status)
	require.Equal(t, workflows.TraceOK, calls["c-3"][len(calls["c-3"])-1].Status)
	require.Zero(t, f.desk.closed["TKT-1"])
	require.Equal(t, 1, f.desk.closed["TKT-2"])
	require.Equal(t, 1, f.desk.closed["TKT-3"])
}

// The ledger claims a signed pause's use with the same marker as a run
// claims a token's: one id, whichever claims it first.
func TestLedgerClaimsTokensWithTheRunsMarker(t *testing.T) {
	require.Equal(t, workflows.StartMarkerWorkflow, ledger.MarkerWorkflow)
	require.Equal(t, workflows.SpentMarkerPrefix, ledger.SpentPrefix)
}
