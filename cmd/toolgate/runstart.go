package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	tgclient "github.com/toolgate/toolgate/client"
)

// startWait bounds how long `toolgate run` waits for the run's first
// workflow task, in which the worker takes or refuses the run.
const startWait = 10 * time.Second

// startPoll is how often it looks meanwhile.
const startPoll = 100 * time.Millisecond

// awaitStart waits (up to startWait) for the first workflow task of the run
// just started to complete, then says "started" — noting when no worker has
// picked the run up — or, if the run has ended already (the worker's policy
// refused it: an unsigned start under require_signed_start, a bad signed
// start …), returns why, for a non-zero exit.
func (c *cli) awaitStart(ctx context.Context, tc client.Client, cl *tgclient.Client, wr client.WorkflowRun, queue string) error {
	id, runID := wr.GetID(), wr.GetRunID()
	started := fmt.Sprintf("started %s (run %s) on task queue %s", id, runID, queue)
	deadline := time.Now().Add(startWait)
	var desc *workflowservice.DescribeWorkflowExecutionResponse
	for {
		var err error
		if desc, err = tc.DescribeWorkflowExecution(ctx, id, runID); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintln(c.stdout, started)
			fmt.Fprintf(c.stderr, "could not tell whether a worker took run %s: %v\n", id, err)
			return nil
		}
		if desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return c.startEnded(ctx, cl, desc, id, started)
		}
		if done, err := firstTaskDone(ctx, tc, id, runID, desc); err == nil && done {
			fmt.Fprintln(c.stdout, started)
			return nil
		}
		if time.Now().Add(startPoll).After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(startPoll):
		}
	}
	if wt := desc.GetPendingWorkflowTask(); wt.GetState() == enumspb.PENDING_WORKFLOW_TASK_STATE_STARTED || wt.GetAttempt() > 1 {
		fmt.Fprintf(c.stdout, "%s (a worker took it, and its first workflow task has not completed after %s: attempt %d; see the worker's log)\n",
			started, startWait, wt.GetAttempt())
		return nil
	}
	fmt.Fprintf(c.stdout, "%s (no worker has picked it up yet: is a worker serving task queue %s?)\n", started, queue)
	return nil
}

// firstTaskDone says whether the run's history holds a completed workflow
// task.
func firstTaskDone(ctx context.Context, tc client.Client, id, runID string, desc *workflowservice.DescribeWorkflowExecutionResponse) (bool, error) {
	// started, task scheduled, started, completed: four events at least
	if desc.GetWorkflowExecutionInfo().GetHistoryLength() < 4 {
		return false, nil
	}
	it := tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return false, fmt.Errorf("reading the history of run %s: %w", id, err)
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return true, nil
		}
	}
	return false, nil
}

// startEnded is what `toolgate run` says of a run that ended before it
// could say "started": one that completed at once was started; one the
// worker refused, or that ended otherwise, is an error.
func (c *cli) startEnded(ctx context.Context, cl *tgclient.Client, desc *workflowservice.DescribeWorkflowExecutionResponse, id, started string) error {
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		fmt.Fprintln(c.stdout, started)
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := cl.Result(rctx, id)
	switch {
	case errors.Is(err, tgclient.ErrRefusedInput):
		return &exitError{code: 1, err: fmt.Errorf("run %s was refused at its start: %w", id, err)}
	case err != nil:
		return &exitError{code: 1, err: fmt.Errorf("run %s ended at once (%s): %w", id, desc.GetWorkflowExecutionInfo().GetStatus(), err)}
	}
	return &exitError{code: 1, err: fmt.Errorf("run %s ended at once (%s)", id, desc.GetWorkflowExecutionInfo().GetStatus())}
}
