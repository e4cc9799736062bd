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

// This file is the executor: every call the planner proposes passes the same
// four steps, in this order — gate, memo, run, fallback. Nothing that can
// produce a result (memo, run, fallback) is reached before the gate has passed.

// outcome is a call's final result as the planner sees it.
type outcome struct {
	Status string
	Result []byte
	Error  string
	Note   string // what else the planner must know: an edit of the arguments

	unreserved bool // the fleet ledger refused the call: it holds nothing to release (guards.go)

	parked *parked // the call waits on and the run continues as new (park.go)
}

// maxFallbackDepth bounds a chain of fallbacks (a fallback's own fallback …).
const maxFallbackDepth = 3

// execute takes one call through gate → memo → run → fallback.
func (r *run) execute(ctx workflow.Context, c tool.Call, depth int) outcome {
	spec, err := r.check(&c)
	if err != nil {
		r.record(c, TraceRecord{Status: TraceError, Error: err.Error()})
		return outcome{Status: TraceError, Error: err.Error()}
	}

	// 1. Gate: a destructive call goes on only with a "yes" for this exact call.
	// (An approver may have edited the arguments: c then holds the edited ones.)
	proposed := c.Args
	span, since := r.callStep(ctx, SpanGate, c, AttrDestructive.Bool(spec.Destructive)), r.TraceSeq
	approval, stop := r.gateStep(ctx, &c, spec)
	if stop != nil && stop.parked != nil { // the run continues as new: its next run takes the wait up
		stop.parked.depth = depth
		return *stop
	}
	r.endGate(ctx, span, c, since, approval, stop)
	if stop != nil {
		if !stop.unreserved {
			r.release(ctx, c, spec) // c holds the arguments proposed: a rejection does not edit them
		}
		return *stop
	}
	out := r.afterGate(ctx, c, spec, approval, depth)
	if !bytes.Equal(proposed, c.Args) {
		note := editNote(approval, c.Args, proposed)
		if out.parked != nil {
			out.parked.note = note
		} else {
			out.Note = note
		}
	}
	return out
}

// afterGate takes a call that passed the gate through memo → run → fallback.
func (r *run) afterGate(ctx workflow.Context, c tool.Call, spec tool.Spec, approval *tool.Approval, depth int) outcome {

	// 2. Memo: a repeated read is answered from the session's memo. Destructive
	// calls skip it both ways: never served from it, never stored in it.
	key, _ := tool.Key(c.Tool, c.Args) // c.Args is already canonical: check passed
	if spec.Memoized() {
		span := r.callStep(ctx, SpanMemo, c)
		res, ok := r.memo.get(key)
		span.end(ctx, "", AttrMemo.String(hitOrMiss(ok)))
		if ok {
			r.release(ctx, c, spec) // answered from the memo: the tool does not run
			r.record(c, TraceRecord{Status: TraceCacheHit, Result: res})
			return outcome{Status: TraceCacheHit, Result: res}
		}
		r.metrics.WithTags(map[string]string{"tool": c.Tool}).Counter(MetricPrefix + "cache_miss").Inc(1)
	}
	return r.runAndFallback(ctx, c, spec, approval, depth, 1)
}

// runAndFallback is steps 3 and 4 of a call, from round round of its
// activity (a call the tool's own question paused goes on at the next).
func (r *run) runAndFallback(ctx workflow.Context, c tool.Call, spec tool.Spec, approval *tool.Approval, depth, round int) outcome {
	key, _ := tool.Key(c.Tool, c.Args)

	// 3. Run: an activity with the tool's bounded retry policy.
	resp, approval, stop, err := r.runStep(ctx, c, spec, approval, round)
	if r.guarded(c.Tool, spec) && (stop == nil || stop.parked == nil) {
		r.settleCall(ctx, c, spec, stop == nil && err == nil) // it ran, or it did not: the ledger counts what ran
	}
	if stop != nil {
		return *stop
	}
	if err == nil {
		if spec.Memoized() {
			r.memo.put(key, c.Tool, resp.Result)
		}
		r.memo.invalidate(spec.Invalidates)
		r.record(c, TraceRecord{Status: TraceOK, Result: resp.Result, Attempts: resp.Attempt, Approver: approverOf(approval)})
		return outcome{Status: TraceOK, Result: resp.Result}
	}
	attempts := attemptsOf(err, spec)

	// 4. Fallback: only for a retryable failure that used up its attempts.
	if spec.Fallback != "" && exhausted(err) && depth < maxFallbackDepth {
		fb := r.newCall(spec.Fallback, c.Args)
		r.link(c.ID, fb.ID)
		r.record(c, TraceRecord{Status: TraceFallback, Error: errorText(err), Attempts: attempts,
			Reason: fmt.Sprintf("falling back to %s as %s", fb.Tool, fb.ID)})
		span := r.callStep(ctx, SpanFallback, c, AttrFallbackFrom.String(c.Tool), AttrFallbackTo.String(fb.Tool), AttrFallbackCallID.String(fb.ID))
		out := r.execute(ctx, fb, depth+1)
		if out.parked != nil {
			out.parked.frames = append(out.parked.frames, FallbackFrame{Call: c, Attempts: attempts, Error: errorText(err), FallbackID: fb.ID, Fallback: fb.Tool})
			return out
		}
		span.end(ctx, errIf(out.Status == TraceError, out.Error), AttrFallbackStatus.String(out.Status))
		out.Error = joinErrors(fallbackError(c.Tool, attempts, errorText(err), fb.Tool, fb.ID), out.Error)
		return out
	}
	r.record(c, TraceRecord{Status: TraceError, Error: errorText(err), Attempts: attempts})
	return outcome{Status: TraceError, Error: errorText(err)}
}

// gate is the rule itself: a call passes if its tool is not destructive, or if
// it carries an approval for this exact call. Anything else raises
// ConfirmationRequired with the exact arguments.
func gate(spec tool.Spec, c tool.Call, approval *tool.Approval) error {
	if !spec.Destructive || approval != nil {
		return nil
	}
	return &tool.ConfirmationRequired{CallID: c.ID, Tool: c.Tool, CallArgs: c.Args}
}

// gateStep applies the gate under the run's policy. It returns the approval
// the call goes on with, or the outcome that ends it (blocked, rejected, expired).
func (r *run) gateStep(ctx workflow.Context, c *tool.Call, spec tool.Spec) (*tool.Approval, *outcome) {
	if r.engine != nil {
		return r.policyGate(ctx, c, spec)
	}
	var approval *tool.Approval
	if spec.Destructive && r.policy == PolicyAlwaysApprove {
		approval = &tool.Approval{Approver: "policy:" + PolicyAlwaysApprove, Kind: tool.ApprovedByPolicy}
	}
	err := gate(spec, *c, approval)
	var cr *tool.ConfirmationRequired
	if !errors.As(err, &cr) {
		if approval != nil {
			r.record(*c, TraceRecord{Status: TraceApproved, Approver: approval.Approver})
		}
		return approval, nil
	}
	r.record(*c, TraceRecord{Status: TraceBlocked, Error: "needs confirmation"})
	if r.policy == PolicyDeny {
		if r.blockedOn == nil {
			r.blockedOn = cr
		}
		return nil, &outcome{Status: TraceBlocked, Error: "destructive call refused by the deny policy"}
	}
	approval, stop := r.pause(ctx, c, KindGate, "needs confirmation", nil)
	if stop != nil {
		return nil, stop
	}
	if err := gate(spec, *c, approval); err != nil { // re-evaluated with the approval
		return nil, &outcome{Status: TraceError, Error: err.Error()}
	}
	return approval, nil
}

// maxInterruptRounds bounds how often one call may interrupt in a row.
const maxInterruptRounds = 3

// runStep runs the call's activity. A tool that refuses to commit and asks for
// a human (an interrupt) pauses the call like a gate block; on approval the
// call runs again with the approval visible to the tool. It returns the
// approval the call last ran with (the trace names who approved what ran). A
// non-nil outcome means a human decision (or its absence) ended the call.
func (r *run) runStep(ctx workflow.Context, c tool.Call, spec tool.Spec, approval *tool.Approval, first int) (tool.Response, *tool.Approval, *outcome, error) {
	for round := first; ; round++ {
		span := r.callStep(ctx, SpanRun, c, AttrRunRound.Int(round), AttrRunLocal.Bool(spec.Local))
		resp, err := r.activity(ctx, c, spec, approval, round)
		endRun(ctx, span, spec, resp, err)
		msg, isInterrupt := interruptMessage(err)
		if !isInterrupt {
			return resp, approval, nil, err
		}
		if round >= maxInterruptRounds {
			return resp, approval, nil, fmt.Errorf("%s interrupted %d times in a row: %s", c.Tool, round, msg)
		}
		r.record(c, TraceRecord{Status: TraceInterrupted, Reason: msg, Attempts: attemptsOf(err, spec)})
		var stop *outcome
		if approval, stop = r.pause(ctx, &c, KindInterrupt, msg, nil); stop != nil {
			if stop.parked != nil {
				stop.parked.round = round
			}
			return resp, nil, stop, nil
		}
	}
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
