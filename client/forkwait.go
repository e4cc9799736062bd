package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/toolgate/toolgate/internal/pause"
	"github.com/toolgate/toolgate/workflows"
)

// forkPoll is how often AwaitFork looks at the fork.
const forkPoll = 200 * time.Millisecond

// AwaitFork waits until the fork Fork started as run runID of id has taken
// up its source — its trace holds the forked record: the operator's act was
// checked and the source's state read — or has closed. The server accepts a
// fork's start before the run checks it, so a fork the run refuses (an
// approver without an operators role, a call its source never made …)
// fails in its first workflow task: AwaitFork then returns the run's
// refusal (ErrRefusedInput, "fork refused: …"). A fork that closed after
// taking up its source (its step ran to an answer) is taken too. When ctx
// ends first, it says so, with what the last look at the run found.
func (c *Client) AwaitFork(ctx context.Context, id, runID string) error {
	var last error
	for {
		taken, err := c.forkTaken(ctx, id, runID)
		var ny notYet
		switch {
		case errors.As(err, &ny):
			last = ny.err
		case taken || err != nil:
			return err
		}
		if !pause.For(ctx, forkPoll) {
			msg := fmt.Sprintf("fork %s (run %s) has not taken up its source yet (is a toolgate worker running on its task queue?)", id, runID)
			if last != nil {
				msg += ": " + last.Error()
			}
			return fmt.Errorf("%s: %w", msg, ctx.Err())
		}
	}
}

// notYet is a look at the fork that could not tell (the run's first task
// has not completed, the query found no worker): AwaitFork looks again.
type notYet struct{ err error }

func (n notYet) Error() string { return n.err.Error() }

// forkTaken looks at the fork once: taken, its refusal, or notYet.
func (c *Client) forkTaken(ctx context.Context, id, runID string) (bool, error) {
	desc, err := c.tc.DescribeWorkflowExecution(ctx, id, runID)
	if err != nil {
		if err = c.classifyDescribe(id, err); errors.Is(err, ErrUnknownRun) {
			return false, err
		}
		return false, notYet{err}
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if _, err := c.Result(ctx, id); err != nil {
			return false, fmt.Errorf("fork %s (run %s) was started, and has ended: %w", id, runID, err)
		}
		return true, nil
	}
	v, err := c.tc.QueryWorkflow(ctx, id, runID, workflows.QueryTrace)
	if err != nil {
		return false, notYet{c.classify(ctx, id, err)}
	}
	var trace []workflows.TraceRecord
	if err := v.Get(&trace); err != nil {
		return false, refused(ErrUnreadable, fmt.Sprintf("the trace of fork %s cannot be read: %v", id, err))
	}
	return slices.ContainsFunc(trace, func(r workflows.TraceRecord) bool { return r.Status == workflows.TraceForked }), nil
}
