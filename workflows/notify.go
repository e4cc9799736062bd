package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/tool"
)

// This file is how a run tells people (rules version 8): for each event a
// target of the worker's --notify file takes, one NotifyActivity, scheduled
// and not waited on — a delivery that fails never holds up a decision nor
// fails the run — whose outcome the trace records. Runs wait for the
// deliveries in flight, at most NotifyDrain, before they end or continue as
// new, so none is dropped.

// notifyState numbers the deliveries a run scheduled (notifySeq: their
// activity ids) and counts those in flight (notifying).
type notifyState struct {
	notifySeq, notifying int
}

// NotifyDrain is the longest a run waits for its deliveries in flight when it
// ends or continues as new: longer than NotifyDeadline, so every delivery
// has ended, delivered or given up, and is in the trace.
const NotifyDrain = 3 * time.Minute

// NotifyDeadline bounds a delivery, its retries included (the activity's
// schedule-to-close timeout).
const NotifyDeadline = 150 * time.Second

// notifyRetry bounds a delivery: NotifyAttempts attempts, 2 s apart and then
// doubling; refusals retrying cannot fix (the notify package's
// "NotifyRefused") stop at the first.
var notifyRetry = &temporal.RetryPolicy{
	InitialInterval:        2 * time.Second,
	BackoffCoefficient:     2,
	MaximumInterval:        15 * time.Second,
	MaximumAttempts:        NotifyAttempts,
	NonRetryableErrorTypes: []string{"NotifyRefused"},
}

// NotifyHeartbeat is a delivery's heartbeat timeout: one whose worker died
// is tried again after it (the notify activity heartbeats while it runs).
const NotifyHeartbeat = 10 * time.Second

// NotifyAttempts is how many times a delivery is tried.
const NotifyAttempts = 4

// notifyCall notifies event for pending call p (waiting, decided, expired).
// decision and by say what became of it.
func (r *run) notifyCall(ctx workflow.Context, event string, p *pending, decision, by string) {
	if !r.notifies(event) {
		return
	}
	n := Notification{Event: event, CallID: p.CallID, Tool: p.Tool, Args: p.CallArgs, ArgsDigest: p.ArgsDigest, Kind: string(p.Kind),
		Reason: p.Reason, Rule: p.Rule, RequestedAt: p.RequestedAt, ExpiresAt: p.ExpiresAt, Decision: decision, By: by}
	if p.Needs != nil {
		need := *p.Needs
		need.Roles = slices.Clone(need.Roles)
		n.Needs = &need
		n.Approvers = r.recipients(p)
	}
	r.notify(ctx, n)
}

// notifyEnd notifies a run's end (blocked, failed).
func (r *run) notifyEnd(ctx workflow.Context, status string) {
	event := map[string]string{StatusBlocked: NotifyBlocked, StatusFailed: NotifyFailed}[status]
	if event == "" || !r.notifies(event) {
		return
	}
	n := Notification{Event: event, Error: r.errText}
	if b := r.blockedOn; b != nil {
		n.CallID, n.Tool, n.Args = b.CallID, b.Tool, b.CallArgs
		n.ArgsDigest, _ = tool.Digest(b.Tool, b.CallArgs)
	}
	r.notify(ctx, n)
}

// notifies says whether a target of the worker takes event.
func (r *run) notifies(event string) bool {
	for _, t := range r.Config.Notify {
		if slices.Contains(t.Events, event) {
			return true
		}
	}
	return false
}

// notify schedules n's delivery to each target that takes its event, and
// records each outcome in the trace when it comes.
func (r *run) notify(ctx workflow.Context, n Notification) {
	info := workflow.GetInfo(ctx)
	n.WorkflowID, n.RunID, n.Status, n.At = info.WorkflowExecution.ID, info.WorkflowExecution.RunID, r.status(), r.now()
	for _, t := range r.Config.Notify {
		if !slices.Contains(t.Events, n.Event) {
			continue
		}
		r.notifySeq++
		n.Target = t.Name
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			ActivityID:             fmt.Sprintf("notify-%d-%s", r.notifySeq, t.Name),
			StartToCloseTimeout:    time.Minute,
			ScheduleToCloseTimeout: NotifyDeadline,
			HeartbeatTimeout:       NotifyHeartbeat,
			RetryPolicy:            notifyRetry,
		})
		f := workflow.ExecuteActivity(actx, NotifyActivity, n)
		call := tool.Call{ID: n.CallID, Tool: n.Tool}
		what := fmt.Sprintf("%s (%s) %s", t.Name, t.Kind, n.Event)
		sent := n
		r.notifying++
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer func() { r.notifying-- }()
			var d Delivery
			err := f.Get(gctx, &d)
			links := ""
			if sent.Event == NotifyWaiting {
				ls := deliveredLinks(d, err)
				ls, unrecorded := r.recordedLinks(gctx, sent, ls)
				links = linksNote(ls, r.takeLinks(sent, ls)) + unrecordedNote(unrecorded)
			}
			if err != nil {
				r.record(call, TraceRecord{Status: TraceNotifyFailed, Reason: what, Error: clip(deliveryError(err)+links, MaxTextBytes)})
				return
			}
			r.record(call, TraceRecord{Status: TraceNotified, Reason: clip(what+": "+d.Detail+links, MaxTextBytes)})
		})
	}
}

// drainNotices waits, at most NotifyDrain, for the deliveries in flight.
func (r *run) drainNotices(ctx workflow.Context) {
	if r.notifying > 0 {
		_, _ = workflow.AwaitWithTimeout(ctx, NotifyDrain, func() bool { return r.notifying == 0 })
	}
}

// recipients are the approvers who may decide p now: eligible for what it
// needs, not its requester, not among those who approved it already.
func (r *run) recipients(p *pending) []Recipient {
	if r.engine == nil {
		return nil
	}
	pol := r.engine.Policy()
	var out []Recipient
	for _, name := range pol.Names() {
		if pol.Eligible(name, p.need) != nil || r.selfOf(name) != "" || slices.Contains(p.ApprovedBy, name) {
			continue
		}
		a, _ := pol.Approver(name)
		out = append(out, Recipient{Name: name, Email: a.Email, Slack: a.Slack, Via: slices.Clone(a.Via)})
	}
	return out
}

// deliveryError is why a delivery failed, with the attempts it took when
// its retries ran out.
func deliveryError(err error) string {
	msg := err.Error()
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		msg = ae.Message()
	}
	var act *temporal.ActivityError
	state := enumspb.RETRY_STATE_UNSPECIFIED
	if errors.As(err, &act) {
		state = act.RetryState()
	}
	switch {
	case state == enumspb.RETRY_STATE_TIMEOUT:
		msg = fmt.Sprintf("%s (gave up: a delivery has %s, retries included)", msg, NotifyDeadline)
	case state == enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE || ae != nil && ae.NonRetryable():
		msg += " (not retried: retrying cannot fix it)"
	case state == enumspb.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED || ae != nil && state == enumspb.RETRY_STATE_UNSPECIFIED:
		msg = fmt.Sprintf("%s (gave up after %d attempts)", msg, NotifyAttempts)
	}
	return strings.TrimSpace(msg)
}

// unrecordedNote says how many links a delivery reported that its worker
// never recorded (rules version 13): none of them decides anything.
func unrecordedNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d link(s) it reports have no record in the authority namespace: refused, none decides", n)
}
