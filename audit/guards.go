package audit

import (
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"

	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/workflows"
)

// This file audits what rules version 10 adds: the fleet ledger's answers
// to the run's reservations (the results of its reserve local activities)
// and the settlements the run signalled it, which the run's history holds.
// Each becomes an entry; a refusal the trace names with no answer of the
// ledger behind it is a problem.

// KindGuard is an answer of the fleet ledger: a call reserved, committed,
// released, or refused by a guard or a pause (Result).
const KindGuard = "guard"

// ViaLedger: the entry is a ledger activity's result in the run's history.
const ViaLedger = "ledger"

// ledgerAnswer is one answer of the ledger (a reserve local activity's
// result), or one settlement the run signalled it.
type ledgerAnswer struct {
	at      time.Time
	eventID int64
	reserve bool // a Verdict; else a Settlement
	verdict ledger.Verdict
	settle  ledger.Settlement
}

// ledgerMarker takes the result a ledger activity's marker records.
func (a *auditor) ledgerMarker(at time.Time, id int64, activity string, result *commonpb.Payloads) {
	if result == nil {
		return // it failed: the run went on without an answer
	}
	if activity != ledger.ReserveActivity {
		return
	}
	ans := ledgerAnswer{at: at, eventID: id, reserve: true}
	if decodePayload(result, &ans.verdict) == nil {
		a.ledgerAnswers = append(a.ledgerAnswers, ans)
	}
}

// ledgerSignal takes a settlement the run signalled the ledger.
func (a *auditor) ledgerSignal(at time.Time, id int64, input *commonpb.Payloads) {
	ans := ledgerAnswer{at: at, eventID: id}
	if decodePayload(input, &ans.settle) == nil {
		a.ledgerAnswers = append(a.ledgerAnswers, ans)
	}
}

// guards adds an entry for each answer of the ledger, and checks that
// every refusal by a guard or a pause in the trace has one behind it.
func (a *auditor) guards() {
	callOf := map[string]ledger.Verdict{} // the digest of a reservation's key -> its answer
	refused := map[string]bool{}          // call id -> the ledger refused or asked
	for _, ans := range a.ledgerAnswers {
		e := Entry{At: ans.at, EventID: ans.eventID, Kind: KindGuard, Via: ViaLedger, Approver: "ledger", Applied: true, Verified: true}
		if ans.reserve {
			v := ans.verdict
			for _, c := range v.Commits { // the run's earlier calls, committed with this reservation
				r := callOf[c]
				ce := e
				ce.CallID, ce.Tool, ce.Result = r.Call, r.Tool, "committed"
				if r.Call == "" {
					ce.Verified, ce.Problem = false, "a commit of a key the ledger never answered this run for"
				}
				a.rep.Entries = append(a.rep.Entries, ce)
			}
			callOf[v.Entry] = v
			e.CallID, e.Tool, e.Result = v.Call, v.Tool, v.Decide
			if v.Guard != "" {
				e.Rule = workflows.GuardRulePrefix + v.Guard
			}
			switch v.Decide {
			case ledger.Reserved:
				e.Result = "reserved at " + v.Stage
			case ledger.Denied, ledger.Paused, ledger.Ask:
				refused[v.Call] = true
				e.Result = v.Decide + ": " + clipReason(v.Reason)
			default:
				e.Verified, e.Problem = false, fmt.Sprintf("the fleet ledger answered %q, which is no verdict", clipReason(v.Decide))
			}
		} else {
			r := callOf[ledger.EntryOf(ans.settle.Key)]
			e.CallID, e.Tool, e.Via, e.Approver = r.Call, r.Tool, ViaSignal, "run"
			e.Result = "released"
			if ans.settle.Commit {
				e.Result = "committed"
			}
			if r.Call == "" {
				e.Verified, e.Problem = false, "a settlement of a key the ledger never answered this run for"
			}
		}
		a.rep.Entries = append(a.rep.Entries, e)
	}
	if a.runRes == nil {
		return
	}
	for _, rec := range a.runRes.Trace {
		if rec.Status != workflows.TraceBlocked || !strings.HasPrefix(rec.Error, plan.DeniedByLedger) || refused[rec.CallID] {
			continue
		}
		a.rep.Entries = append(a.rep.Entries, Entry{At: rec.At, EventID: a.traceAt, Kind: KindGuard, Via: ViaTrace, CallID: rec.CallID, Tool: rec.Tool,
			Rule: rec.Rule, Approver: "ledger", Result: "denied", Applied: true,
			Problem: fmt.Sprintf("the trace says the fleet ledger refused %s %s, but the history holds no answer of the ledger that refuses it", rec.CallID, rec.Tool)})
	}
}

func clipReason(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
