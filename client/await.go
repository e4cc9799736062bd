package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/internal/pause"
	"github.com/toolgate/toolgate/workflows"
)

// How often AwaitDecision looks at the run: first after decisionPoll, then
// twice as long each time, up to maxDecisionPoll.
const (
	decisionPoll    = 50 * time.Millisecond
	maxDecisionPoll = time.Second
)

// AwaitDecision waits until run id has at least one call waiting for a human
// — a destructive call held at the gate, or a tool that asked for one (an
// interrupt) — and returns the run's state then. Its Interrupts hold each
// waiting call with its exact arguments and args_digest, which Approve and
// Reject bind their decision to. Start returns as soon as the server has the
// run, before the run has planned anything: call AwaitDecision after Start,
// not State, to decide the run's first waiting call. A call still waiting
// after a decision (a quorum that wants a second approval) is returned again
// at once.
//
// It looks at the run with the state query, first at once, then after 50 ms,
// backing off to once a second. A run that ends before any call waits is an
// error: an *EndedError (errors.Is(err, ErrRunEnded)) that says how it ended,
// "run ID completed without waiting for a decision: ANSWER" (or failed, with
// its error). An unknown run is ErrUnknownRun, a state this client cannot
// decode ErrUnreadable; other failed looks (no worker answering yet) are
// looked past. When ctx ends first, the error wraps ctx.Err() and says what
// the last look found.
func (c *Client) AwaitDecision(ctx context.Context, id string) (workflows.State, error) {
	wait := c.decisionPoll
	for {
		st, open, err := c.openState(ctx, id)
		var last string
		switch {
		case errors.Is(err, ErrUnknownRun), errors.Is(err, ErrUnreadable):
			return workflows.State{}, err
		case err != nil:
			last = err.Error()
		case !open:
			return workflows.State{}, c.ended(ctx, id)
		case len(st.Interrupts) > 0:
			return st, nil
		default:
			last = "status " + st.Status
		}
		if !pause.For(ctx, wait) {
			return workflows.State{}, fmt.Errorf("run %s has no call waiting for a decision yet (last look: %s): %w", id, last, ctx.Err())
		}
		wait = min(2*wait, maxDecisionPoll)
	}
}

// openState is the run's state if it is open (the server refuses the query
// of a closed run, and says so without a worker). A run that closed as it
// continued as new counts as open, with an empty state: its next run is
// looked at next time.
func (c *Client) openState(ctx context.Context, id string) (st workflows.State, open bool, err error) {
	resp, err := c.tc.QueryWorkflowWithOptions(ctx, &sdkclient.QueryWorkflowWithOptionsRequest{
		WorkflowID: id, QueryType: workflows.QueryState, QueryRejectCondition: enumspb.QUERY_REJECT_CONDITION_NOT_OPEN})
	if err != nil {
		return st, false, c.classify(ctx, id, err)
	}
	if rej := resp.QueryRejected; rej != nil {
		return st, rej.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW, nil
	}
	if resp.QueryResult == nil {
		return st, true, errors.New("the state query answered nothing")
	}
	if err := resp.QueryResult.Get(&st); err != nil {
		return st, false, refused(ErrUnreadable, fmt.Sprintf("the %s of run %s cannot be read: %v", workflows.QueryState, id, err))
	}
	return st, true, nil
}

// ended is the error of a run that closed before any of its calls waited:
// how it ended, from its result.
func (c *Client) ended(ctx context.Context, id string) error {
	res, err := c.Result(ctx, id)
	if err != nil {
		return &EndedError{ID: id, Err: err}
	}
	return &EndedError{ID: id, Result: &res}
}

// EndedError is AwaitDecision's error for a run that ended before any of its
// calls waited for a human. errors.Is(err, ErrRunEnded) holds for it.
type EndedError struct {
	ID string
	// Result is how the run ended (its status, answer or error), when its
	// result could be read.
	Result *workflows.RunResult
	// Err is why the result could not be read otherwise: the run refused its
	// input (ErrRefusedInput), was terminated, timed out, …
	Err error
}

func (e *EndedError) Error() string {
	head := fmt.Sprintf("run %s ended without waiting for a decision", e.ID)
	if e.Result == nil {
		return fmt.Sprintf("%s: %v", head, e.Err)
	}
	switch e.Result.Status {
	case workflows.StatusCompleted, workflows.StatusFailed:
		head = fmt.Sprintf("run %s %s without waiting for a decision", e.ID, e.Result.Status)
	default:
		head = fmt.Sprintf("run %s ended %s without waiting for a decision", e.ID, e.Result.Status)
	}
	for _, why := range []string{e.Result.Error, e.Result.Answer} {
		if why != "" {
			return head + ": " + why
		}
	}
	return head
}

// Is makes errors.Is(err, ErrRunEnded) hold, and ErrRunClosed too: the run
// has closed.
func (e *EndedError) Is(target error) bool { return target == ErrRunEnded || target == ErrRunClosed }

// Unwrap is why the run's result could not be read, if it could not.
func (e *EndedError) Unwrap() error { return e.Err }
