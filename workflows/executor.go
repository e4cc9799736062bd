package workflows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/tool"
)

// This file is the run stage of a call's path (pipeline.go): the tool's
// activity (or local activity, or an activity another worker hosts), with
// the tool's bounded retry policy, and what its answer makes of the call.

// outcome is a call's final result as the planner sees it.
type outcome struct {
	Status string
	Result []byte
	Error  string
	Note   string // what else the planner must know: an edit of the arguments

	parked *parked // the call waits on and the run continues as new (park.go)
}

// maxFallbackDepth bounds a chain of fallbacks (a fallback's own fallback …).
const maxFallbackDepth = 3

// maxInterruptRounds bounds how often one call may interrupt in a row.
const maxInterruptRounds = 3

// runStage runs one round of the call's activity. A tool that refuses to
// commit and asks for a human (an interrupt) is asked like a gate block
// (stage ask); on approval the call runs again, with the approval visible to
// the tool. A retryable failure that used up its attempts goes to the
// tool's fallback, if it has one.
func (r *run) runStage(ctx workflow.Context, f *flight) stage {
	resp, err := r.activity(ctx, f.c, f.spec, f.approval, f.round)
	if msg, ok := interruptMessage(err); ok {
		if f.round < maxInterruptRounds {
			r.record(f.c, TraceRecord{Status: TraceInterrupted, Reason: msg, Attempts: attemptsOf(err, f.spec)})
			f.kind, f.question, f.asked = KindInterrupt, msg, nil
			return stageAsk
		}
		err = fmt.Errorf("%s interrupted %d times in a row: %s", f.c.Tool, f.round, msg)
	}
	if err == nil {
		f.ran = true // the fleet ledger commits it
		if f.spec.Memoized() {
			key, _ := tool.Key(f.c.Tool, f.c.Args) // canonical: check passed
			r.memo.put(key, f.c.Tool, resp.Result)
		}
		r.memo.invalidate(f.spec.Invalidates)
		return f.endWith(outcome{Status: TraceOK, Result: resp.Result},
			TraceRecord{Status: TraceOK, Result: resp.Result, Attempts: resp.Attempt, Approver: approverOf(f.approval)})
	}
	attempts := attemptsOf(err, f.spec)
	if f.spec.Fallback != "" && exhausted(err) && f.depth < maxFallbackDepth {
		fb := r.newCall(f.spec.Fallback, f.c.Args)
		r.link(f.c.ID, fb.ID)
		r.record(f.c, TraceRecord{Status: TraceFallback, Error: errorText(err), Attempts: attempts,
			Reason: fmt.Sprintf("falling back to %s as %s", fb.Tool, fb.ID)})
		f.fallback = &FallbackFrame{Call: f.c, Attempts: attempts, Error: errorText(err), FallbackID: fb.ID, Fallback: fb.Tool}
		return stageFallback
	}
	return f.endWith(outcome{Status: TraceError, Error: errorText(err)}, TraceRecord{Status: TraceError, Error: errorText(err), Attempts: attempts})
}

// fallbackStage answers the call by its fallback: a call of its own, along
// the whole path from the first stage, one deeper in the chain.
func (r *run) fallbackStage(ctx workflow.Context, f *flight) stage {
	fb := f.fallback
	c := tool.Call{ID: fb.FallbackID, Tool: fb.Fallback, Args: f.c.Args}
	return f.end(r.flow(ctx, &flight{c: c, depth: f.depth + 1, round: 1, outer: []FallbackFrame{*fb}}, stageCheck))
}

// activity schedules the tool's activity (or local activity) for one round of a call.
func (r *run) activity(ctx workflow.Context, c tool.Call, spec tool.Spec, approval *tool.Approval, round int) (tool.Response, error) {
	req := tool.Request{
		CallID:         c.ID,
		IdempotencyKey: r.callKey(ctx, c),
		Args:           c.Args,
		Approval:       approval,
	}
	retry := &temporal.RetryPolicy{
		InitialInterval:        spec.RetryInterval(),
		BackoffCoefficient:     2,
		MaximumInterval:        max(10*spec.RetryInterval(), time.Minute),
		MaximumAttempts:        spec.Attempts(),
		NonRetryableErrorTypes: spec.Retry.NonRetryable,
	}
	var resp tool.Response
	if spec.Local {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: spec.AttemptTimeout(),
			RetryPolicy:         retry,
		})
		err := workflow.ExecuteLocalActivity(lctx, spec.Name, req).Get(lctx, &resp)
		r.localSince++
		return resp, err
	}
	id := c.ID
	if round > 1 {
		id = fmt.Sprintf("%s#%d", c.ID, round)
	}
	p, err := r.permit(ctx, c, spec, req, id)
	if err != nil {
		return tool.Response{}, err
	}
	req.Permit = p
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ActivityID:          id,
		StartToCloseTimeout: spec.AttemptTimeout(),
		RetryPolicy:         retry,
	})
	if spec.Remote() {
		return r.remoteActivity(actx, spec, req)
	}
	err = workflow.ExecuteActivity(actx, spec.Name, req).Get(actx, &resp)
	return resp, err
}

// remoteActivity schedules a tool another worker hosts (tool.Spec.TaskQueue):
// its activity gets req (the call's id, idempotency key, arguments and
// approval) and returns the result as any JSON value, which is held to
// tool.MaxResultBytes here, as the worker's own tools are where they run.
// Temporal does not tell a workflow which attempt succeeded, so the result
// claims none (Attempt 0: the trace counts no attempts it does not know).
func (r *run) remoteActivity(ctx workflow.Context, spec tool.Spec, req tool.Request) (tool.Response, error) {
	ctx = workflow.WithTaskQueue(ctx, spec.TaskQueue)
	var raw json.RawMessage
	if err := workflow.ExecuteActivity(ctx, spec.ActivityType(), req).Get(ctx, &raw); err != nil {
		return tool.Response{}, err
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("null")
	}
	return tool.Response{Result: tool.ClipResult(raw, tool.MaxResultBytes)}, nil
}

func approverOf(a *tool.Approval) string {
	if a == nil {
		return ""
	}
	return a.Approver
}

// exhausted tells a retryable failure that used up its attempts (or its time)
// from one that was never going to succeed.
func exhausted(err error) bool {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.NonRetryable() {
		return false
	}
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) {
		switch actErr.RetryState() {
		case enumspb.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED, enumspb.RETRY_STATE_TIMEOUT:
			return true
		case enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE:
			return false
		}
	}
	var timeoutErr *temporal.TimeoutError
	return errors.As(err, &timeoutErr) || errors.As(err, &appErr)
}

// attemptsOf reads how many attempts a failed call made.
func attemptsOf(err error, spec tool.Spec) int32 {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.HasDetails() {
		var d tool.ErrorDetails
		if appErr.Details(&d) == nil && d.Attempt > 0 {
			return d.Attempt
		}
	}
	if exhausted(err) {
		return spec.Attempts()
	}
	return 1
}

// interruptMessage reports whether err is a tool's interrupt, and its message.
func interruptMessage(err error) (string, bool) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != tool.TypeInterrupt {
		return "", false
	}
	var d tool.ErrorDetails
	if appErr.HasDetails() && appErr.Details(&d) == nil && d.Message != "" {
		return d.Message, true
	}
	return appErr.Message(), true
}

// errorText is the innermost useful message of an activity failure.
func errorText(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	var timeoutErr *temporal.TimeoutError
	if errors.As(err, &timeoutErr) {
		return "timed out (" + timeoutErr.TimeoutType().String() + ")"
	}
	return err.Error()
}

func joinErrors(a, b string) string {
	if b == "" {
		return a
	}
	return a + "; " + b
}
