package workflows

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
)

// This file is AgentRun's tracing hook: each step — plan, gate, memo, run,
// fallback — is reported as a span to a Tracer found in the workflow context
// (package tracing sets one from a workflow interceptor; tests may set their
// own with WithTracer). Without one, every step here is a no-op.
//
// Spans are an observability side effect, never an input: reporting one
// issues no command, writes nothing to the history and feeds nothing back
// into the run's state, so a run makes the same commands with or without a
// Tracer. A step's span is reported once, when the step ends outside replay:
// a worker replaying a history (after a restart or a cache eviction) reports
// nothing for the steps it replays, because they were reported when they
// first ran. (A workflow task that fails after its steps were reported is run
// again, and reports them again: tracing, like metrics, is at least once.)

// Tracer receives AgentRun's steps as spans. Implementations are called from
// workflow code, but only outside replay, and must not block.
type Tracer interface {
	// StartSpan starts the span of a step named name (SpanPlan …), a child of
	// the workflow's span in ctx. start is its start time; the zero time means
	// now. A step that began while the run was replaying its history is
	// started when it ends, with the workflow time at which it began.
	StartSpan(ctx workflow.Context, name string, start time.Time) Span
}

// Span is one step's span.
type Span interface {
	// End ends the span with attrs; a non-empty errText marks it failed.
	End(errText string, attrs ...attribute.KeyValue)
}

type tracerKey struct{}

// WithTracer returns ctx with t as the Tracer AgentRun reports its steps to.
func WithTracer(ctx workflow.Context, t Tracer) workflow.Context {
	return workflow.WithValue(ctx, tracerKey{}, t)
}

// tracerOf is the Tracer in ctx, or nil.
func tracerOf(ctx workflow.Context) Tracer {
	t, _ := ctx.Value(tracerKey{}).(Tracer)
	return t
}

// The spans AgentRun reports: one per planner step, and per call one for the
// gate, one for the memo (non-destructive calls), one per run of its
// activity and one for a fallback taken.
const (
	SpanPlan     = "toolgate.plan"
	SpanGate     = "toolgate.gate"
	SpanMemo     = "toolgate.memo"
	SpanRun      = "toolgate.run"
	SpanFallback = "toolgate.fallback"
)

// The attributes of AgentRun's spans. Spans carry names, ids, decisions and
// counts — never a call's arguments or results.
const (
	AttrTurn   attribute.Key = "toolgate.turn"    // every span
	AttrCallID attribute.Key = "toolgate.call_id" // gate, memo, run, fallback
	AttrTool   attribute.Key = "toolgate.tool"    // gate, memo, run, fallback

	AttrPlanStep     attribute.Key = "toolgate.plan.step"     // the run's step number, from 1
	AttrPlanPlanner  attribute.Key = "toolgate.plan.planner"  // scripted, support, openai …
	AttrPlanCalls    attribute.Key = "toolgate.plan.calls"    // calls proposed
	AttrPlanAnswered attribute.Key = "toolgate.plan.answered" // the planner answered instead

	AttrDestructive  attribute.Key = "toolgate.gate.destructive"
	AttrGateDecision attribute.Key = "toolgate.gate.decision" // passed, approved, blocked, rejected, expired, error
	AttrGateRule     attribute.Key = "toolgate.gate.rule"     // the policy rule that decided
	AttrGateApprover attribute.Key = "toolgate.gate.approver" // who approved or rejected
	AttrGateWaited   attribute.Key = "toolgate.gate.waited"   // the call waited for a human

	AttrMemo attribute.Key = "toolgate.memo" // hit or miss

	AttrRunStatus   attribute.Key = "toolgate.run.status"   // ok, error, interrupted
	AttrRunAttempts attribute.Key = "toolgate.run.attempts" // activity attempts
	AttrRunRound    attribute.Key = "toolgate.run.round"    // 2 and on: again after a tool's interrupt was approved
	AttrRunLocal    attribute.Key = "toolgate.run.local"    // a local activity

	AttrFallbackFrom   attribute.Key = "toolgate.fallback.from"    // the tool that failed
	AttrFallbackTo     attribute.Key = "toolgate.fallback.to"      // its fallback
	AttrFallbackCallID attribute.Key = "toolgate.fallback.call_id" // the fallback's call id
	AttrFallbackStatus attribute.Key = "toolgate.fallback.status"  // the fallback call's outcome
)

// GateDecisionPassed: the gate let a call through without an approval (a
// read, or a call no rule holds back).
const GateDecisionPassed = "passed"

// step is a step's span as AgentRun holds it; nil (no Tracer) does nothing.
type step struct {
	tracer Tracer
	name   string
	began  time.Time // workflow time: deterministic, the same on replay
	span   Span      // nil if the step began during replay
	attrs  []attribute.KeyValue
}

// startStep begins a step's span. It starts the Tracer's span only outside
// replay; the workflow time is kept for a step that ends after replay.
func (r *run) startStep(ctx workflow.Context, name string, attrs ...attribute.KeyValue) *step {
	t := tracerOf(ctx)
	if t == nil {
		return nil
	}
	s := &step{tracer: t, name: name, began: workflow.Now(ctx), attrs: append(attrs, AttrTurn.Int(r.Turn))}
	if !workflow.IsReplaying(ctx) {
		s.span = t.StartSpan(ctx, name, time.Time{})
	}
	return s
}

// callStep begins the span of a call's step.
func (r *run) callStep(ctx workflow.Context, name string, c tool.Call, attrs ...attribute.KeyValue) *step {
	if tracerOf(ctx) == nil {
		return nil
	}
	return r.startStep(ctx, name, append([]attribute.KeyValue{AttrCallID.String(c.ID), AttrTool.String(c.Tool)}, attrs...)...)
}

// end reports the step's span, unless the run is replaying: a replayed step
// was reported when it first ran.
func (s *step) end(ctx workflow.Context, errText string, attrs ...attribute.KeyValue) {
	if s == nil || workflow.IsReplaying(ctx) {
		return
	}
	if s.span == nil {
		s.span = s.tracer.StartSpan(ctx, s.name, s.began)
	}
	s.span.End(clip(errText, MaxTextBytes/4), append(s.attrs, attrs...)...)
}

// planStep asks the planner for the next step (plan) in a SpanPlan span.
func (r *run) planStep(ctx workflow.Context) (plan.Decision, error) {
	span := r.startStep(ctx, SpanPlan, AttrPlanStep.Int(r.Steps+1), AttrPlanPlanner.String(r.in.Planner.Kind))
	d, err := r.plan(ctx)
	span.end(ctx, errTextOf(err), AttrPlanCalls.Int(len(d.Calls)), AttrPlanAnswered.Bool(err == nil && len(d.Calls) == 0))
	return d, err
}

// endGate ends the gate's span on call c (see gateAttrs).
func (r *run) endGate(ctx workflow.Context, s *step, c tool.Call, since int, approval *tool.Approval, stop *outcome) {
	if s != nil {
		s.end(ctx, "", r.gateAttrs(c, since, approval, stop)...)
	}
}

// endRun ends the span of one run of a call's activity (see runAttrs).
func endRun(ctx workflow.Context, s *step, spec tool.Spec, resp tool.Response, err error) {
	if s != nil {
		attrs, errText := runAttrs(spec, resp, err)
		s.end(ctx, errText, attrs...)
	}
}

// gateAttrs describes the gate's decision on call c from its outcome and the
// trace records the gate wrote for c (those after sequence number since).
func (r *run) gateAttrs(c tool.Call, since int, approval *tool.Approval, stop *outcome) []attribute.KeyValue {
	decision := GateDecisionPassed
	switch {
	case stop != nil:
		decision = stop.Status
	case approval != nil:
		decision = TraceApproved
	}
	var rule, by string
	blocked := false
	for _, rec := range r.traceSince(c.ID, since) {
		switch rec.Status {
		case TraceShadow:
			continue // a rule that would have decided, but did not
		case TraceBlocked:
			blocked = true
		case TraceApproved, TraceRejected:
			by = rec.Approver
		}
		if rec.Rule != "" {
			rule = rec.Rule
		}
	}
	attrs := []attribute.KeyValue{AttrGateDecision.String(decision), AttrGateWaited.Bool(blocked && decision != TraceBlocked)}
	if rule != "" {
		attrs = append(attrs, AttrGateRule.String(rule))
	}
	if by != "" {
		attrs = append(attrs, AttrGateApprover.String(by))
	}
	return attrs
}

// traceSince returns the trace records of call id after sequence number
// since, oldest first (as many as the bounded trace still holds).
func (r *run) traceSince(id string, since int) []TraceRecord {
	i := len(r.Trace)
	for i > 0 && r.Trace[i-1].Seq > since {
		i--
	}
	var out []TraceRecord
	for _, rec := range r.Trace[i:] {
		if rec.CallID == id {
			out = append(out, rec)
		}
	}
	return out
}

// runAttrs describes one run of a call's activity, and its error text.
func runAttrs(spec tool.Spec, resp tool.Response, err error) ([]attribute.KeyValue, string) {
	status, attempts, errText := TraceOK, max(resp.Attempt, 1), ""
	if _, interrupted := interruptMessage(err); interrupted {
		status, attempts = TraceInterrupted, attemptsOf(err, spec)
	} else if err != nil {
		status, attempts, errText = TraceError, attemptsOf(err, spec), errorText(err)
	}
	return []attribute.KeyValue{AttrRunStatus.String(status), AttrRunAttempts.Int(int(attempts))}, errText
}

func hitOrMiss(hit bool) string {
	if hit {
		return "hit"
	}
	return "miss"
}

// errTextOf is errorText(err), or "" for no error.
func errTextOf(err error) string {
	if err == nil {
		return ""
	}
	return errorText(err)
}

// errIf is text when cond holds, else "".
func errIf(cond bool, text string) string {
	if cond {
		return text
	}
	return ""
}
