package worker

import (
	"context"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/authority"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// resets is the reset activity (workflows.ResetActivity): it reads the run's
// own history up to the event the run was reset at, and says what reset (if
// any) is there; for a request that names the reset's id (rules version 14),
// with the worker's record of it from the authority namespace (or, without
// one, the run's own).
type resets struct{ conn *authority.Conn }

func (rs resets) read(ctx context.Context, req workflows.ResetRequest) (workflows.ResetEvent, error) {
	c := activity.GetClient(ctx)
	if c == nil {
		return workflows.ResetEvent{}, errors.New("no Temporal client in this activity's context")
	}
	var ev workflows.ResetEvent
	it := c.GetWorkflowHistory(ctx, req.WorkflowID, req.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return workflows.ResetEvent{}, fmt.Errorf("reading the history of run %s of %s: %w", req.RunID, req.WorkflowID, err)
		}
		if e.GetEventId() < req.Event {
			continue
		}
		a := e.GetWorkflowTaskFailedEventAttributes()
		if e.GetEventId() == req.Event && a != nil && a.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW {
			ev = workflows.ResetEvent{Found: true, BaseRunID: a.GetBaseRunId(), NewRunID: a.GetNewRunId(), Made: a.GetNewRunId() == req.RunID,
				Reason: a.GetFailure().GetMessage()}
		}
		break
	}
	if !ev.Found || req.Reset == "" {
		return ev, nil
	}
	conn := connOf(ctx, rs.conn)
	var rec workflows.RewindRecord
	switch err := authority.Lookup(ctx, conn.Client, conn.Namespace, workflows.RewindRecordPrefix+req.Reset, &rec); {
	case errors.Is(err, authority.ErrNoRecord):
	case err != nil:
		return workflows.ResetEvent{}, err
	default:
		ev.Record = &rec
	}
	return ev, nil
}

// rewinder is the rewind activity (workflows.RewindActivity): it carries out
// an operator's rewind request — the run checks the act, the worker claims
// the reset, resets the run, records the rewind and tells the new run — in
// the authority namespace of conn (or, without one, the runs' own).
type rewinder struct{ conn *authority.Conn }

func (rw rewinder) rewind(ctx context.Context, req workflows.RewindRequest) (workflows.RewindDone, error) {
	info, conn, c := activity.GetInfo(ctx), connOf(ctx, rw.conn), activity.GetClient(ctx)
	if c == nil {
		return workflows.RewindDone{}, errors.New("no Temporal client in this activity's context")
	}
	n := req.Note
	refuse := func(format string, args ...any) (workflows.RewindDone, error) {
		return workflows.RewindDone{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), workflows.RefusedUnauthorized, nil)
	}
	// Carried out already (a retry after the record, a copy of the request).
	if rec, ok, err := rw.recorded(ctx, conn, req); err != nil || ok {
		return workflows.RewindDone{RunID: rec.NewRunID}, err
	}
	// 1. The run checks the act: its fields and, under a policy, the token.
	if _, err := c.QueryWorkflow(ctx, req.WorkflowID, "", workflows.QueryCheckRewind, n); err != nil {
		var qf *serviceerror.QueryFailed
		if errors.As(err, &qf) {
			return refuse("rewind refused by run %s: %s; nothing changed", req.WorkflowID, qf.Message)
		}
		return workflows.RewindDone{}, fmt.Errorf("asking run %s to check the rewind: %w", req.WorkflowID, err)
	}
	// 2. One request carries out a reset: the claim knows its claimant, so
	// this activity's retries are its own.
	claimant := info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/" + info.ActivityID
	err := authority.Claim(ctx, conn.Client, conn.Namespace, workflows.RewindClaimPrefix+n.Reset, claimant)
	if errors.Is(err, authority.ErrUsed) {
		if rec, ok, err := rw.recorded(ctx, conn, req); err != nil || ok {
			return workflows.RewindDone{RunID: rec.NewRunID}, err
		}
		return refuse("the rewind of reset %s is being carried out by another request, or was begun and never finished: "+
			"look at the run (toolgate steps %s) and, to rewind it, preview the rewind again", n.Reset, req.WorkflowID)
	}
	if err != nil {
		return workflows.RewindDone{}, fmt.Errorf("claiming reset %s: %w", n.Reset, err)
	}
	// 3. The reset. Its request id is the reset's id: the server answers a
	// retry with the run the first attempt made.
	by := n.By
	if n.Token != "" {
		if cl, err := signed.Peek(n.Token); err == nil {
			by = cl.Approver // the run verified the token (1)
		}
	}
	resp, err := c.WorkflowService().ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 info.Namespace,
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: req.WorkflowID, RunId: n.BaseRunID},
		Reason:                    fmt.Sprintf("toolgate rewind to just before %s (step %d) by %s, preview %s, %s", n.CallID, n.Step, by, n.Preview, workflows.ResetMark(n.Reset)),
		WorkflowTaskFinishEventId: n.Event,
		RequestId:                 n.Reset,
		Identity:                  info.WorkflowExecution.ID,
		ResetReapplyExcludeTypes: []enumspb.ResetReapplyExcludeType{enumspb.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL, enumspb.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE,
			enumspb.RESET_REAPPLY_EXCLUDE_TYPE_NEXUS},
	})
	var invalid *serviceerror.InvalidArgument
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &invalid), errors.As(err, &notFound):
		return refuse("resetting run %s of %s to event %d: %v", n.BaseRunID, req.WorkflowID, n.Event, err)
	case err != nil:
		return workflows.RewindDone{}, fmt.Errorf("resetting run %s of %s to event %d: %w", n.BaseRunID, req.WorkflowID, n.Event, err)
	}
	// 4. The record: the run takes the note only with it.
	rec := workflows.RewindRecord{WorkflowID: req.WorkflowID, BaseRunID: n.BaseRunID, Event: n.Event, NewRunID: resp.GetRunId(),
		CallID: n.CallID, Preview: n.Preview, By: by, Reset: n.Reset, Signed: n.Token != ""}
	if err := authority.Record(ctx, conn.Client, conn.Namespace, workflows.RewindRecordPrefix+n.Reset, claimant, rec); err != nil {
		return workflows.RewindDone{}, fmt.Errorf("recording the rewind of run %s (reset %s into run %s): %w", req.WorkflowID, n.Reset, resp.GetRunId(), err)
	}
	// 5. The note, to the run the reset made.
	if err := c.SignalWorkflow(ctx, req.WorkflowID, resp.GetRunId(), workflows.SignalRewound, n); err != nil {
		return workflows.RewindDone{}, fmt.Errorf("run %s was rewound (new run %s), telling it who rewound it: %w", req.WorkflowID, resp.GetRunId(), err)
	}
	return workflows.RewindDone{RunID: resp.GetRunId()}, nil
}

// recorded reads the record of req's reset: ok when it is there and names
// req's rewind (carried out already), an error when it names another.
func (rewinder) recorded(ctx context.Context, conn *authority.Conn, req workflows.RewindRequest) (workflows.RewindRecord, bool, error) {
	var rec workflows.RewindRecord
	err := authority.Lookup(ctx, conn.Client, conn.Namespace, workflows.RewindRecordPrefix+req.Note.Reset, &rec)
	switch {
	case errors.Is(err, authority.ErrNoRecord):
		return rec, false, nil
	case err != nil:
		return rec, false, err
	case rec.WorkflowID != req.WorkflowID || rec.BaseRunID != req.Note.BaseRunID || rec.Event != req.Note.Event || rec.CallID != req.Note.CallID:
		return rec, false, temporal.NewNonRetryableApplicationError(fmt.Sprintf("reset %s was carried out for another rewind (run %s of %s to event %d): a reset's id names one rewind",
			req.Note.Reset, rec.BaseRunID, rec.WorkflowID, rec.Event), workflows.RefusedUnauthorized, nil)
	}
	return rec, true, nil
}
