package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// This file is a rewind as a worker carries it out (rules version 14). An
// operator's rewind travels as a request (RewindRequest: the run and the
// signed note) in a workflow of its own (RewindWorkflow), started on the
// run's task queue in the runs' namespace by whoever asks; a worker of that
// queue carries it out in a local activity (RewindActivity):
//
//  1. the run checks the act (QueryCheckRewind: under a policy, an
//     operator's token over this run, call, base run, preview and reset);
//  2. the worker claims the reset's id in the authority namespace
//     (RewindClaimPrefix): one request carries out a reset, however often
//     its note is copied;
//  3. it resets the run (the reset's request id is the note's reset, so a
//     retry after a crash makes no second run);
//  4. it records the rewind in the authority namespace (RewindRecordPrefix:
//     who signed, the base run, the event, the run the reset made);
//  5. it tells the new run (SignalRewound).
//
// The run takes the note only if the record names the reset that made it
// (checkReset): a reset made by anyone else — any client of the runs may
// reset a run — is no rewind, takes no note and grants nobody anything, and
// toolgate audit names it.

// RewindWorkflow is the workflow that carries a rewind request to a worker,
// and RewindActivity the local activity that carries it out.
const (
	RewindWorkflow = "toolgate.rewind"
	RewindActivity = "toolgate.rewind"
)

// RewindClaimPrefix starts the id of the claim a worker makes of a reset
// before carrying it out, and RewindRecordPrefix that of the record it
// makes once it has: both followed by the reset's id (RewindNote.Reset), in
// the authority namespace (or, for a worker with none, the runs' own, where
// RewindWorkflowID names the request's workflow: the three never meet).
const (
	RewindClaimPrefix  = "toolgate-rewind-claim-"
	RewindRecordPrefix = "toolgate-rewound-"
)

// RewindWorkflowID is the workflow id of the request that carries the
// rewind of reset id.
func RewindWorkflowID(reset string) string { return "toolgate-rewind-" + reset }

// RewindRequest is an operator's rewind as it travels to a worker: the run
// (its workflow id; the note names the run of its chain to reset) and the
// note the new run is told.
type RewindRequest struct {
	WorkflowID string     `json:"workflow_id"`
	Note       RewindNote `json:"note"`
}

// RewindDone is a rewind carried out: the run the reset made.
type RewindDone struct {
	RunID string `json:"run_id"`
}

// RewindRecord is what a worker records of a rewind it carried out, in the
// authority namespace (RewindRecordPrefix + Reset).
type RewindRecord struct {
	WorkflowID string `json:"workflow_id"`
	// BaseRunID is the run reset, Event the workflow task's end it was reset
	// to, NewRunID the run the reset made.
	BaseRunID string `json:"base_run_id"`
	Event     int64  `json:"event"`
	NewRunID  string `json:"new_run_id"`
	// CallID and Preview are the note's: the call rewound to and the
	// preview's digest.
	CallID  string `json:"call_id"`
	Preview string `json:"preview"`
	// By is who rewound the run: the token's signer under a policy, else
	// the note's by, as they say.
	By    string `json:"by,omitempty"`
	Reset string `json:"reset"`
	// Signed tells a note that came with a token.
	Signed bool `json:"signed,omitempty"`
}

// covers says whether rec records the reset that made run newRun (of
// workflow wid) and the note n names.
func (rec *RewindRecord) covers(wid, newRun string, n RewindNote) bool {
	return rec != nil && rec.WorkflowID == wid && rec.NewRunID == newRun && rec.BaseRunID == n.BaseRunID &&
		rec.Event == n.Event && rec.Reset == n.Reset && rec.CallID == n.CallID && rec.Preview == n.Preview
}

// RewindTimeout bounds how long a rewind request waits for a worker to
// carry it out.
const RewindTimeout = 2 * time.Minute

// Rewind is RewindWorkflow: it carries the request out in a local activity
// of the worker that answers it, and returns the run the reset made. A
// request the run refuses, or whose reset another request carried out, fails
// with the reason (not retried).
func Rewind(ctx workflow.Context, req RewindRequest) (RewindDone, error) {
	if !isResetID(req.Note.Reset) || req.WorkflowID == "" || len(req.WorkflowID) > MaxNameBytes {
		return RewindDone{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("rewind request refused: it names workflow %q and reset %q; want a run's workflow id and the reset's id (32 hex digits)",
				clip(req.WorkflowID, MaxNameBytes), clip(req.Note.Reset, 64)), RefusedInput, nil)
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: RewindTimeout - 10*time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: 5 * time.Second},
	})
	var done RewindDone
	err := workflow.ExecuteLocalActivity(lctx, RewindActivity, req).Get(ctx, &done)
	return done, err
}
