package workflows

import (
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/plan"
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

// spanOf is the span stage at of call f reports in: the gate's stages
// (gate, guard, decide, and a human's decision at the gate) share one; the
// memo has one for a read; each round of the run one; a fallback taken one.
// The check and a wait on a tool's own question report none.
func spanOf(at stage, f *flight) string {
	switch at {
	case stageGate, stageGuard, stageDecide:
		return SpanGate
	case stageAsk, stageWait:
		if f.kind == KindGate {
			return SpanGate
		}
	case stageMemo:
		if f.spec.Memoized() {
			return SpanMemo
		}
	case stageRun:
		return SpanRun
	case stageFallback:
		return SpanFallback
	}
	return ""
}

// beginSpan begins the span of stage at, at the boundary before it, unless
// it goes on the span already open (the gate's stages).
func (r *run) beginSpan(ctx workflow.Context, f *flight, at stage) {
	name := spanOf(at, f)
	if name == "" || f.span != nil || tracerOf(ctx) == nil {
		return
	}
	attrs := []attribute.KeyValue{AttrCallID.String(f.c.ID), AttrTool.String(f.c.Tool)}
	switch name {
	case SpanGate:
		attrs = append(attrs, AttrDestructive.Bool(f.spec.Destructive))
	case SpanRun:
		attrs = append(attrs, AttrRunRound.Int(f.round), AttrRunLocal.Bool(f.spec.Local))
	case SpanFallback:
		attrs = append(attrs, AttrFallbackFrom.String(f.c.Tool), AttrFallbackTo.String(f.fallback.Fallback), AttrFallbackCallID.String(f.fallback.FallbackID))
	}
	f.span, f.since = r.startStep(ctx, name, attrs...), r.TraceSeq
}

// endSpan ends the open span at the boundary before stage next, unless
// next goes on in it. Its attributes are read from the trace records the
// stages wrote while it was open. A call that parked reports nothing here:
// the run that takes it up reports its wait.
func (r *run) endSpan(ctx workflow.Context, f *flight, next stage) {
	s := f.span
	if s == nil || (next != stageEnd && spanOf(next, f) == s.name) {
		return
	}
	f.span = nil
	if f.out.parked != nil {
		return
	}
	recs := r.traceSince(f.c.ID, f.since)
	switch s.name {
	case SpanGate:
		s.end(ctx, "", gateAttrs(f, recs)...)
	case SpanMemo:
		s.end(ctx, "", AttrMemo.String(hitOrMiss(slices.ContainsFunc(recs, func(rec TraceRecord) bool { return rec.Status == TraceCacheHit }))))
	case SpanRun:
		attrs, errText := runAttrs(recs)
		s.end(ctx, errText, attrs...)
	case SpanFallback:
		s.end(ctx, errIf(f.out.Status == TraceError, f.out.Error), AttrFallbackStatus.String(f.out.Status))
	}
}

// gateAttrs describes the gate's decision on call f: how it left the gate,
// and who decided by which rule, from the records its stages wrote.
func gateAttrs(f *flight, recs []TraceRecord) []attribute.KeyValue {
	decision := GateDecisionPassed
	switch {
	case f.out.Status != "":
		decision = f.out.Status
	case f.approval != nil:
		decision = TraceApproved
	}
	var rule, by string
	blocked := false
	for _, rec := range recs {
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

// runAttrs describes one round of a call's activity from the record it
// ended with (ok, interrupted, failed, or failed and fell back), and its
// error text.
func runAttrs(recs []TraceRecord) ([]attribute.KeyValue, string) {
	for i := len(recs) - 1; i >= 0; i-- {
		rec := recs[i]
		status, errText := rec.Status, ""
		switch rec.Status {
		case TraceOK, TraceInterrupted:
		case TraceError, TraceFallback:
			status, errText = TraceError, rec.Error
		default:
			continue
		}
		return []attribute.KeyValue{AttrRunStatus.String(status), AttrRunAttempts.Int(int(max(rec.Attempts, 1)))}, errText
	}
	return nil, ""
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
