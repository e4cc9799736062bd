package audit

import (
	"errors"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"

	"github.com/toolgate/toolgate/authority"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// This file audits rewinds and forks (rules version 7). A rewind is a
// Temporal reset of the run — the new run's history holds the events
// before the reset point, then a WorkflowTaskFailed event of cause
// RESET_WORKFLOW naming the base run, then what the new run did — followed
// by the rewound signal, the note that says who rewound it: under a policy
// an operator's signed rewind (KindRewind). A reset no verified note
// follows is listed as unattributed (KindReset): anyone who may reset
// workflows on the server can make one, and its reason is free text. A
// fork is a run started as a fork of another (RunInput.fork), under a
// policy with an operator's signed request_token of act fork over its
// input (KindFork).

// resetEvent is a reset as the new run's history holds it.
type resetEvent struct {
	at      time.Time
	eventID int64
	base    string // the run that was reset
	newRun  string // the run the reset made
	reason  string // the reset's reason, as whoever reset it gave it
}

// startFork makes the entry of a fork's start: the operator's token (act
// fork), verified once the policy is read.
func (a *auditor) startFork(at time.Time, id int64, f *workflows.Fork, token string) {
	a.startAt = len(a.rep.Entries)
	e := Entry{At: at, EventID: id, Kind: KindFork, Via: ViaStart, CallID: f.At, Applied: true, Problem: "pending",
		Result: fmt.Sprintf("fork of %s at %s", f.Source, f.At)}
	if len(f.Args) > 0 {
		e.Result += ", its arguments replaced with " + string(f.Args)
	}
	if token == "" {
		e.Unsigned = true
	} else {
		e.Approver = peekApprover(token)
		a.tokens = append(a.tokens, pendingToken{at: a.startAt, token: token, action: signed.ActionFork})
	}
	a.rep.Entries = append(a.rep.Entries, e)
}

// rewindNote makes the entry of a rewound signal: who says they rewound the
// run, to which call, from which preview.
func (a *auditor) rewindNote(at time.Time, id int64, p *commonpb.Payloads) {
	e := Entry{At: at, EventID: id, Kind: KindRewind, Via: ViaSignal, Applied: true, Problem: "pending"}
	i := len(a.rep.Entries)
	var n workflows.RewindNote
	if err := decodePayload(p, &n); err != nil {
		e.Problem = "malformed rewind note: " + err.Error()
		a.rep.Entries = append(a.rep.Entries, e)
		return
	}
	e.CallID, e.Tool, e.Digest = n.CallID, n.Tool, n.Preview
	e.Result = fmt.Sprintf("rewound to just before %s (step %d): run %s reset to event %d", n.CallID, n.Step, n.BaseRunID, n.Event)
	if n.Token == "" {
		e.Unsigned, e.Approver = true, n.By
	} else {
		e.Approver = peekApprover(n.Token)
		a.tokens = append(a.tokens, pendingToken{at: i, token: n.Token, action: signed.ActionRewind, note: &n})
	}
	a.rep.Entries = append(a.rep.Entries, e)
	a.rewinds = append(a.rewinds, i)
	a.notes = append(a.notes, n)
}

// checkRewinds ties each rewind note to the reset it names — one of the
// base run it names, at the event it names, before the note — and whether
// the run took it (its trace records the rewind); then lists every reset no
// verified note follows as unattributed. Without a policy a note cannot be
// verified: there a reset is attributed by a note that names it (as they
// say), and the note is listed as unsigned.
func (a *auditor) checkRewinds() {
	attributed := map[int64]bool{}
	for k, i := range a.rewinds {
		e, n := &a.rep.Entries[i], a.notes[k]
		var reset *resetEvent
		for j := range a.resets {
			if r := &a.resets[j]; r.eventID < e.EventID && r.base == n.BaseRunID {
				reset = r
			}
		}
		// Taken by the run: its trace records the rewind (unknown while the
		// run has not completed). A note the run refused attributes nothing.
		taken := a.runRes == nil || tracesRewind(a.runRes.Trace, n)
		var problem string
		switch {
		case reset == nil:
			problem = fmt.Sprintf("no reset of run %s precedes the note in this history: the run was not rewound as the note says", n.BaseRunID)
		case reset.eventID != n.Event:
			problem = fmt.Sprintf("the note names a reset of run %s to event %d, the history's is to event %d", n.BaseRunID, n.Event, reset.eventID)
		case a.version >= versionTrust3 && !strings.Contains(reset.reason, workflows.ResetMark(n.Reset)):
			problem = fmt.Sprintf("the reset at event %d is not the one the note names: its reason %q does not say %q (a rewind note covers the one reset it names)",
				reset.eventID, reset.reason, workflows.ResetMark(n.Reset))
		case taken && (e.Verified || (e.Unsigned && !a.rep.Recorded)):
			attributed[reset.eventID] = true
			if e.Verified && a.version < versionRewinds { // from 14 a reset is a worker's: no note vouches for a person's
				a.signedResets[reset.eventID] = fmt.Sprintf("%s's verified rewind (event %d)", e.Approver, e.EventID)
			}
		}
		if problem != "" {
			e.Verified = false
			if e.Problem != "" {
				problem = e.Problem + "; " + problem
			}
			e.Problem = problem
		}
		if !taken {
			e.Applied = false
			e.Result += "; not taken by the run (its trace records no such rewind)"
		}
	}
	for _, r := range a.resets {
		covered, why := a.recorded(r)
		if attributed[r.eventID] && a.version < versionRewinds {
			why = "" // before rules version 14 an operator's note vouches for the reset it names, whoever made it
		}
		if attributed[r.eventID] && why == "" {
			continue
		}
		e := Entry{At: r.at, EventID: r.eventID, Kind: KindReset, Via: ViaReset, Applied: true,
			Result: fmt.Sprintf("run %s reset: %q", r.base, r.reason)}
		switch {
		case covered != "":
			e.Verified, e.Result = true, covered
		case attributed[r.eventID]:
			e.Problem = why
		default:
			e.Problem = "unattributed reset: no verified rewind note (an operator's signed rewind) follows it; its reason is whatever whoever reset the run wrote"
			if !a.rep.Recorded {
				e.Problem = "unattributed reset: no rewind note follows it; its reason is whatever whoever reset the run wrote"
			}
			if why != "" {
				e.Problem += "; " + why
			}
		}
		a.rep.Entries = append(a.rep.Entries, e)
	}
}

// recorded checks reset r against the record a worker made of it in the
// authority namespace (WithRewindRecords): covered says whose rewind the
// record says it carried out, why why not; both "" when the audit reads no
// records.
func (a *auditor) recorded(r resetEvent) (covered, why string) {
	if a.records == nil {
		return "", ""
	}
	id := resetIDOf(r.reason)
	if id == "" {
		return "", "no worker's record covers it: its reason names no reset id (toolgate rewind's end \"reset <id>\"), so no worker carried it out"
	}
	rec, err := a.records(id)
	switch {
	case errors.Is(err, authority.ErrNoRecord):
		return "", fmt.Sprintf("no worker's record covers it: the authority namespace holds no %s%s", workflows.RewindRecordPrefix, id)
	case err != nil:
		return "", fmt.Sprintf("its record %s%s could not be read: %v", workflows.RewindRecordPrefix, id, err)
	case rec.NewRunID != r.newRun || rec.BaseRunID != r.base || rec.Event != r.eventID || rec.WorkflowID != a.rep.WorkflowID:
		return "", fmt.Sprintf("no worker's record covers it: %s%s records the reset of run %s of %s at event %d into run %s, this one reset run %s at event %d into run %s",
			workflows.RewindRecordPrefix, id, rec.BaseRunID, rec.WorkflowID, rec.Event, rec.NewRunID, r.base, r.eventID, r.newRun)
	}
	by := rec.By
	if !rec.Signed {
		by += " (as they say: unsigned)"
	}
	return fmt.Sprintf("run %s reset to event %d by a worker carrying out %s's rewind to just before %s (its record %s%s in the authority namespace)",
		r.base, r.eventID, by, rec.CallID, workflows.RewindRecordPrefix, id), ""
}

// resetIDOf is the reset id a reset's reason ends with (workflows.ResetMark),
// "" if none.
func resetIDOf(reason string) string {
	i := strings.LastIndex(reason, workflows.ResetMark(""))
	if i < 0 {
		return ""
	}
	id := reason[i+len(workflows.ResetMark("")):]
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return ""
	}
	return id
}

// tracesRewind: the run's trace records the rewind the note says (the
// record AgentRun makes of a note it takes, which names its preview).
func tracesRewind(trace []workflows.TraceRecord, n workflows.RewindNote) bool {
	for _, r := range trace {
		if r.Status == workflows.TraceRewound && r.CallID == n.CallID && strings.Contains(r.Reason, "preview "+n.Preview) &&
			strings.Contains(r.Reason, "run "+n.BaseRunID+" ") {
			return true
		}
	}
	return false
}
