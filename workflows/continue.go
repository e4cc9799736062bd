package workflows

import (
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"
)

// historyState estimates the history's length between workflow tasks
// (historyLength): lenSeen, the length last seen, and localSince, the local
// activities completed since.
type historyState struct {
	lenSeen, localSince int
}

// continueAsNewDue reports whether the run should continue as new: Temporal
// suggests it, or the history reached the run's own limit. A run that has not
// yet made progress never continues as new, so a limit set too low cannot
// loop forever.
func (r *run) continueAsNewDue(ctx workflow.Context) bool {
	if r.progress == 0 {
		return false
	}
	return workflow.GetInfo(ctx).GetContinueAsNewSuggested() ||
		(r.in.HistoryLimit > 0 && r.historyLength(ctx) >= r.in.HistoryLimit)
}

// historyLength estimates the history's length now. The SDK's count is
// updated only when a workflow task starts, and fast local activities (tools
// registered Local, the support planner) can run many in one task, each adding
// a marker event: count those since the SDK's count last moved.
func (r *run) historyLength(ctx workflow.Context) int {
	n := workflow.GetInfo(ctx).GetCurrentHistoryLength()
	if n != r.lenSeen {
		r.lenSeen, r.localSince = n, 0
	}
	return n + r.localSince
}

// continueAsNew hands the run's state to a new run of the same workflow id:
// the memo, the call counter (call ids go on: c-101 follows c-100), the
// transcript, the kept trace, queued messages and the end flag, within
// CarryBudget (fit). It is called
// only between steps, when no call is in flight and none waits for a human.
// Handlers finish first and signals already delivered are applied, so nothing
// that arrived around the switch is lost.
func (r *run) continueAsNew(ctx workflow.Context) error {
	r.drainNotices(ctx)
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	yield(ctx)
	r.drain(ctx)
	next := r.in
	next.Carry = r.carryOver(next)
	return workflow.NewContinueAsNewError(ctx, AgentRun, next)
}

// yield lets every other coroutine run once. A signal that arrived in this
// workflow task may already sit in the listener's blocked selector — taken off
// its channel, so drain cannot see it — until the listener runs.
func yield(ctx workflow.Context) {
	done := false
	workflow.Go(ctx, func(workflow.Context) { done = true })
	_ = workflow.Await(ctx, func() bool { return done })
}

// checkChain makes sure the carry was written by this workflow's own code: the
// run it was continued from must be an AgentRun on this task queue. (A client
// cannot start a run "continued"; but a workflow of its own, on its own task
// queue, could continue as new into AgentRun with any input.)
func (r *run) checkChain(lctx workflow.Context) error {
	info := workflow.GetInfo(lctx)
	req := ChainRequest{WorkflowID: info.WorkflowExecution.ID, RunID: info.ContinuedExecutionRunID}
	var prev ChainInfo
	if err := workflow.ExecuteLocalActivity(lctx, ChainActivity, req).Get(lctx, &prev); err != nil {
		return fmt.Errorf("carry refused: cannot tell which run it came from (%s): %w", req.RunID, err)
	}
	if prev.WorkflowType != WorkflowName || prev.TaskQueue != info.TaskQueueName {
		return fmt.Errorf("carry refused: it came from run %s of workflow type %q on task queue %q; only an %s on task queue %q may hand state to this run",
			req.RunID, clip(prev.WorkflowType, MaxNameBytes), clip(prev.TaskQueue, MaxNameBytes), WorkflowName, info.TaskQueueName)
	}
	if continued := enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW.String(); prev.Status != continued {
		// A cron or retry successor gets the input its predecessor was
		// started with, carry and all: whoever wrote that input, it was not
		// this run's predecessor continuing as new.
		return fmt.Errorf("carry refused: run %s, which this run follows, closed %s, not %s: only a run that continues as new hands state to the next "+
			"(a retry or cron successor gets its predecessor's input unchanged, which a client wrote)", req.RunID, clip(prev.Status, MaxNameBytes), continued)
	}
	return nil
}
