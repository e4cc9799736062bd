package client

import (
	"context"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/toolgate/toolgate/workflows"
)

// resultCheckInterval is how often Result asks the server whether the run it
// waits for has closed, in case the long poll that should say so does not.
const resultCheckInterval = time.Second

// maxResultRestarts bounds how many times one Result starts its long poll
// again (a run that closed cannot keep a fresh poll waiting).
const maxResultRestarts = 3

// Result waits for the run's result (following continue-as-new). A run that
// refused its input ends with ErrRefusedInput.
//
// It waits with Temporal's result long poll (GetWorkflowExecutionHistory for
// the close event) and, once a second, asks whether the run has closed. The
// server (v1.32.1) can miss a run's close: its long poll listens on a
// channel of one notification and drops one that arrives while the previous
// is still unread (service/history/events/notifier.go), then waits out its
// 20 s expiration. That happened about once in a thousand short runs here
// (BENCHMARKS.md, "The 20-second result stall"). When the run has closed and
// the poll has not answered, Result starts the poll again, which reads the
// closed run at once: a result is never more than about a second late.
func (c *Client) Result(ctx context.Context, id string) (workflows.RunResult, error) {
	var res workflows.RunResult
	err := c.awaitResult(ctx, id, &res)
	return res, c.classify(ctx, id, err)
}

// awaitResult runs the SDK's result wait (Get) and restarts it when the run
// is seen closed while Get still waits.
func (c *Client) awaitResult(ctx context.Context, id string, out *workflows.RunResult) error {
	for restarts := 0; ; restarts++ {
		gctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- c.tc.GetWorkflow(gctx, id, "").Get(gctx, out) }()
		var stalled bool
		var err error
		if restarts < maxResultRestarts {
			stalled, err = c.watchResult(ctx, id, done)
		} else {
			err = <-done
		}
		cancel()
		if !stalled {
			return err
		}
		// The run closed and Get did not say so: stop it (it may have
		// answered meanwhile: then its answer stands) and ask again.
		if err := <-done; err == nil || ctx.Err() != nil {
			return err
		}
	}
}

// watchResult waits for done. Every resultCheck it describes the run; if the
// run (the last of its chain) is no longer running, it reports a stall.
func (c *Client) watchResult(ctx context.Context, id string, done <-chan error) (stalled bool, err error) {
	tick := time.NewTicker(c.resultCheck)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return false, err
		case <-tick.C:
			if c.closed(ctx, id) {
				select {
				case err := <-done: // it answered meanwhile
					return false, err
				default:
					return true, nil
				}
			}
		}
	}
}

// closed says whether the current run of id has closed. An error says no:
// the wait goes on, and Get reports what is wrong.
func (c *Client) closed(ctx context.Context, id string) bool {
	desc, err := c.tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return false
	}
	st := desc.GetWorkflowExecutionInfo().GetStatus()
	return st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && st != enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED
}
