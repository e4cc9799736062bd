// Package tracing traces toolgate runs with OpenTelemetry. Interceptors gives
// a worker the Temporal SDK's OpenTelemetry interceptor (spans for the
// workflow, its activities, signals, queries and updates, replay-safe as the
// SDK makes them) followed by toolgate's own: a span for each step of
// AgentRun — toolgate.plan, toolgate.gate, toolgate.memo, toolgate.run,
// toolgate.fallback — as children of the SDK's workflow span, with the
// attributes listed in package workflows (decision, rule, approver, memo hit
// or miss, attempts, fallback from and to). OTLP builds a TracerProvider that
// exports to an OTLP/gRPC collector. Redact (OTLP's Encrypted) keeps a
// payload's text out of the spans of a worker whose payloads are encrypted.
//
//	tp, err := tracing.OTLP(ctx, "127.0.0.1:4317", true)
//	…
//	defer tp.Shutdown(context.Background()) // after the worker has stopped: flushes
//	ics, err := tracing.Interceptors(tp)
//	…
//	w, err := worker.Start(c, workflows.TaskQueue, worker.Options{Tools: …, Interceptors: ics})
//
// Neither holds global state: nothing here reads or sets OpenTelemetry's
// global TracerProvider or propagator.
package tracing

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/workflows"
)

// InstrumentationName names the tracer of toolgate's own spans.
const InstrumentationName = "github.com/toolgate/toolgate"

// sdkTracerName is the name the SDK's interceptor gives its tracer by default.
const sdkTracerName = "temporal-sdk-go"

// Interceptors returns the worker interceptors that trace runs with tp, in
// the order they must run: the SDK's OpenTelemetry tracing interceptor, then
// Steps. Give them to worker.Options.Interceptors (or to the Interceptors of
// the SDK's worker.Options). If your client already carries the SDK's
// tracing interceptor (client interceptors apply to its workers too), add
// only Steps(tp).
func Interceptors(tp trace.TracerProvider) ([]interceptor.WorkerInterceptor, error) {
	sdk, err := opentelemetry.NewTracingInterceptor(opentelemetry.TracerOptions{Tracer: tp.Tracer(sdkTracerName)})
	if err != nil {
		return nil, fmt.Errorf("tracing: the SDK's OpenTelemetry interceptor: %w", err)
	}
	return []interceptor.WorkerInterceptor{sdk, Steps(tp)}, nil
}

// Steps returns the worker interceptor that has AgentRun report its steps as
// spans of tp (workflows.WithTracer). It must come after the SDK's
// OpenTelemetry tracing interceptor (made with its default SpanContextKey),
// whose workflow span it finds in the workflow context and makes the parent
// of the step spans; without that interceptor, each step span is a root.
func Steps(tp trace.TracerProvider) interceptor.WorkerInterceptor {
	return &steps{tracer: stepTracer{tracer: tp.Tracer(InstrumentationName)}}
}

// steps puts the step tracer in the context of every workflow the worker runs.
type steps struct {
	interceptor.WorkerInterceptorBase
	tracer workflows.Tracer
}

func (s *steps) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	i := &stepsInbound{tracer: s.tracer}
	i.Next = next
	return i
}

type stepsInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	tracer workflows.Tracer
}

// ExecuteWorkflow runs the workflow with the step tracer in its context: a
// context value, which issues no command and changes nothing in the history.
func (i *stepsInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	return i.Next.ExecuteWorkflow(workflows.WithTracer(ctx, i.tracer), in)
}

// stepTracer is the workflows.Tracer of Steps. It makes each span when the
// step ends (so nothing is left open when a worker drops a run from its
// cache mid-step), with the wall-clock times the step began and ended.
//
// The wall clock is read here, from workflow code, on purpose: AgentRun calls
// a Tracer only outside replay, and a timestamp goes nowhere but into the
// exported span — never into the run's state, its commands or its history —
// so a replay makes the same decisions whatever the clock said. A step that
// began during replay (a worker that restarted while a call waited for
// approval) starts at the workflow time it began, which the history holds.
type stepTracer struct {
	tracer trace.Tracer
}

func (t stepTracer) StartSpan(ctx workflow.Context, name string, start time.Time) workflows.Span {
	if start.IsZero() {
		start = time.Now()
	}
	parent, _ := opentelemetry.SpanFromWorkflowContext(ctx)
	return &span{tracer: t.tracer, parent: parent.SpanContext(), name: name, start: start}
}

// span is a step begun: made and ended by End.
type span struct {
	tracer trace.Tracer
	parent trace.SpanContext
	name   string
	start  time.Time
}

func (s *span) End(errText string, attrs ...attribute.KeyValue) {
	ctx := trace.ContextWithSpanContext(context.Background(), s.parent)
	_, sp := s.tracer.Start(ctx, s.name, trace.WithTimestamp(s.start), trace.WithAttributes(attrs...),
		trace.WithSpanKind(trace.SpanKindInternal))
	if errText != "" {
		sp.SetStatus(codes.Error, errText)
	}
	end := time.Now()
	if end.Before(s.start) { // a start read from the workflow's clock, ahead of this host's
		end = s.start
	}
	sp.End(trace.WithTimestamp(end))
}
