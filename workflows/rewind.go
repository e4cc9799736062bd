package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/internal/names"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
)

// This file is a rewind as the run sees it (rules version 7). A rewind is a
// Temporal reset of the run to the end of the workflow task in which a
// call's planner step began, with the signals and updates after that point
// left out: every approval given after it is gone, every destructive call
// after it comes back to the gate, and a call id proposed again with other
// arguments has another idempotency key (tool.ArgsKey). The new run is then
// told who rewound it and from which preview (SignalRewound), which the run
// records — under a policy only from an operator's token; from rules version
// 14 only when a worker carried the reset out and recorded it
// (rewindact.go).

// RewindNote is what toolgate rewind tells the new run (SignalRewound), and
// what QueryCheckRewind checks before the reset.
type RewindNote struct {
	// CallID is the call rewound to, Tool its tool, Step its planner step.
	CallID string `json:"call_id"`
	Tool   string `json:"tool,omitempty"`
	Step   int    `json:"step"`
	// BaseRunID is the run of the chain that was reset, and Event the
	// workflow task's end it was reset to.
	BaseRunID string `json:"base_run_id"`
	Event     int64  `json:"event"`
	// Preview is the digest of the preview the rewind was made from.
	Preview string `json:"preview"`
	// By names who rewound the run (no policy: as they say).
	By string `json:"by,omitempty"`
	// Token is the operator's signed rewind (signed.ActionRewind), under a
	// policy.
	Token string `json:"token,omitempty"`
	// Reset (rules version 9) is the reset's id: the reset's request id,
	// which its reason names (ResetMark) and, under a policy, the token
	// signs (signed.Claims.Reset). The run takes the note only in the run
	// that reset made.
	Reset string `json:"reset,omitempty"`
}

// ResetMark is how a reset's reason names its id: toolgate rewind ends
// the reason it gives the reset with it.
func ResetMark(id string) string { return "reset " + id }

// ResetActivity is the local activity a rewound run (rules version 9)
// reads its own reset with: the WorkflowTaskFailed event of cause
// RESET_WORKFLOW its history holds at the note's event.
const ResetActivity = "toolgate.reset"

// ResetRequest names a run and the event its reset should be at; from
// rules version 14 also the reset's id, whose record (RewindRecordPrefix +
// Reset) the activity reads from the authority namespace.
type ResetRequest struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Event      int64  `json:"event"`
	Reset      string `json:"reset,omitempty"`
}

// ResetEvent is what ResetActivity found at that event: a reset (Found),
// the run it reset (BaseRunID), the run it made (NewRunID), whether that is
// the run asking (Made: told by the activity, so a replay under another run
// id decides the same) and its reason.
type ResetEvent struct {
	Found     bool   `json:"found"`
	BaseRunID string `json:"base_run_id,omitempty"`
	NewRunID  string `json:"new_run_id,omitempty"`
	Made      bool   `json:"made,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Record is the worker's record of the reset the request names, read
	// from the authority namespace (rules version 14); nil if there is none.
	Record *RewindRecord `json:"record,omitempty"`
}

// isResetID tells an id toolgate rewind makes: 32 lowercase hex digits.
func isResetID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// MaxTokenBytes bounds a token in a rewind note.
const MaxTokenBytes = 4096

// checkRewind checks a note: its fields, and under a policy the operator's
// token (bound to this run, the call, the base run and the preview). It
// returns who rewound the run.
func (r *run) checkRewind(n RewindNote) (string, signed.Claims, error) {
	var none signed.Claims
	switch {
	case !isCallID(n.CallID):
		return "", none, refusal(RefusedInput, "rewind note refused: call_id %q: want a call id such as \"c-3\"", clip(n.CallID, MaxNameBytes))
	case n.BaseRunID == "" || len(n.BaseRunID) > MaxNameBytes:
		return "", none, refusal(RefusedInput, "rewind note refused: base_run_id must name the run that was reset")
	case len(n.Preview) != 64:
		return "", none, refusal(RefusedInput, "rewind note refused: preview must be the preview's digest (64 hex digits)")
	case len(n.Token) > MaxTokenBytes:
		return "", none, refusal(RefusedInput, "rewind note refused: the token has %d bytes, at most %d", len(n.Token), MaxTokenBytes)
	case len(n.By) > MaxNameBytes || len(n.Tool) > MaxNameBytes:
		return "", none, refusal(RefusedInput, "rewind note refused: by and tool are at most %d bytes", MaxNameBytes)
	case !isResetID(n.Reset):
		return "", none, refusal(RefusedInput, "rewind note refused: reset must name the reset it comes with (its request id, 32 hex digits, which its reason names): this run takes a rewind only from the reset it names")
	}
	if r.engine == nil {
		if n.Token != "" {
			return "", none, refusal(RefusedInput, "rewind note refused: this worker has no policy (--policy) to verify its token against")
		}
		if err := r.checkRewinder(n.By); err != nil {
			return "", none, err
		}
		return n.By, none, nil
	}
	c, err := r.verifyToken(n.Token)
	if err == nil {
		err = r.checkTarget(c, signed.ActionRewind)
	}
	if err == nil {
		if e := r.engine.Policy().Operator(c.Approver); e != nil {
			err = refusal(RefusedUnauthorized, "%s", e.Error())
		}
	}
	if err == nil && (c.CallID != n.CallID || c.Source != n.BaseRunID || c.Preview != n.Preview) {
		err = refusal(RefusedUnauthorized, "%s's token signs a rewind of run %s to %s from preview %s, not this one (run %s to %s from preview %s)",
			c.Approver, clip(c.Source, MaxNameBytes), clip(c.CallID, MaxNameBytes), clipDigest(c.Preview), n.BaseRunID, n.CallID, clipDigest(n.Preview))
	}
	if err == nil && c.Reset != n.Reset {
		err = refusal(RefusedUnauthorized, "%s's token signs the rewind of reset %q, not this note's (%q): a rewind's token covers the one reset it names",
			c.Approver, clip(c.Reset, 64), n.Reset)
	}
	if err != nil {
		return "", c, err
	}
	return c.Approver, c, nil
}

// checkRewinder refuses the name a rewind note
// without a policy gives its rewinder (by, recorded as who rewound the run)
// when it does not read as it is written (names.Check) or looks like a name
// the run or a door writes itself: a rewind is no rule, grant, door or
// withdrawal.
func (r *run) checkRewinder(by string) error {
	if by == "" {
		return nil
	}
	if err := names.Check(by); err != nil {
		return refusal(RefusedInput, "rewind note refused: by %q: %v; the name of who rewound the run must read as it is written", clip(by, MaxNameBytes), err)
	}
	forms := slices.Concat(ReservedApprovers, DoorApprovers, []string{WithdrawnBy})
	if form, ok := names.LooksLike(by, forms); ok {
		return refusal(RefusedInput, "rewind note refused: by %q looks like %s, how the run or a door names a rule, a grant, a door's decision or a withdrawal (%s): name who rewound the run",
			clip(by, MaxNameBytes), form, strings.Join(forms, ", "))
	}
	return nil
}

func clipDigest(d string) string {
	if len(d) > 16 {
		return clip(d[:16], 16)
	}
	return clip(d, 16)
}

// rewound records a rewind note the run takes: who rewound it, to which
// call, from which preview. A note it refuses is kept in state.refused.
// The note must come with the reset that made this run — the one it names,
// of the run it names, at the event it names, which the reset activity
// tells, its answer recorded in the history (checkReset) — and its token is
// claimed on the server (spent.go): no second reset, however like the
// first, takes it.
func (r *run) rewound(ctx workflow.Context, n RewindNote) error {
	for _, rec := range r.Trace { // the same note twice (a retried rewind) is recorded once
		if rec.Status == TraceRewound && rec.CallID == n.CallID && rec.Reason == rewindReason(n) {
			return nil
		}
	}
	if r.noted != "" {
		return fmt.Errorf("rewind note refused: this run has taken the note of the reset that made it already (%s): a reset is noted once", r.noted)
	}
	by, c, err := r.checkRewind(n)
	if err == nil {
		if err = r.checkReset(ctx, n); err == nil {
			err = r.claimToken(ctx, n.Token, c.Approver)
		}
	}
	if err != nil {
		return err
	}
	r.spend(n.Token, c)
	r.noted = "to just before " + n.CallID
	if by != "" {
		r.noted += ", by " + by
	}
	r.record(tool.Call{ID: n.CallID, Tool: n.Tool}, TraceRecord{Status: TraceRewound, Approver: by, Reason: rewindReason(n)})
	r.publish(r.root)
	return nil
}

// checkReset reads the reset at the note's event from this run's own
// history (ResetActivity) and makes sure it is the note's: a reset of the
// note's base run that made this run, whose reason names the note's reset.
func (r *run) checkReset(ctx workflow.Context, n RewindNote) error {
	info := workflow.GetInfo(ctx)
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second})
	var ev ResetEvent
	req := ResetRequest{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID, Event: n.Event, Reset: n.Reset}
	if err := workflow.ExecuteLocalActivity(lctx, ResetActivity, req).Get(lctx, &ev); err != nil {
		return fmt.Errorf("rewind note refused: reading this run's reset at event %d: %s", n.Event, clip(errorText(err), 300))
	}
	switch {
	case !ev.Found:
		return fmt.Errorf("rewind note refused: this run's history holds no reset at event %d, where the note says it was reset", n.Event)
	case !ev.Made || ev.BaseRunID != n.BaseRunID:
		return fmt.Errorf("rewind note refused: the reset at event %d reset run %s into run %s; the note names a reset of run %s into this run (%s)",
			n.Event, clip(ev.BaseRunID, MaxNameBytes), clip(ev.NewRunID, MaxNameBytes), n.BaseRunID, info.WorkflowExecution.RunID)
	case !strings.Contains(ev.Reason, ResetMark(n.Reset)):
		return fmt.Errorf("rewind note refused: the reset that made this run is not the one the note names (its reason %q does not say %q): a rewind note is taken only in the run its own reset made",
			clip(ev.Reason, 300), ResetMark(n.Reset))
	case !ev.Record.covers(info.WorkflowExecution.ID, ev.NewRunID, n):
		return fmt.Errorf("rewind note refused: no worker recorded carrying out the reset that made this run (%s%s in the authority namespace%s): "+
			"a rewind is carried out by a worker on an operator's request (toolgate rewind); a reset anyone else made is no rewind and takes no note",
			RewindRecordPrefix, n.Reset, recordSays(ev.Record))
	}
	return nil
}

// recordSays says what a record that does not cover a reset names instead.
func recordSays(rec *RewindRecord) string {
	if rec == nil {
		return " holds none"
	}
	return fmt.Sprintf(" names the reset of run %s of %s at event %d into run %s", clip(rec.BaseRunID, MaxNameBytes), clip(rec.WorkflowID, MaxNameBytes), rec.Event, clip(rec.NewRunID, MaxNameBytes))
}

func rewindReason(n RewindNote) string {
	return fmt.Sprintf("rewound to just before %s's step (step %d): run %s reset to event %d; preview %s", n.CallID, n.Step, n.BaseRunID, n.Event, n.Preview)
}
