package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/toolgate/toolgate/workflows"
)

// This file keeps what encryption seals out of the spans a worker exports.
// With a codec, a run's payloads (a tool's arguments, results and error
// texts) are sealed before they reach the Temporal server, but a worker's
// spans are made from the plaintext: the SDK's interceptor records an
// activity's error as the span's status and an "exception" event, and the
// error of a tool quotes its arguments as often as not. Redact passes each
// span on with only what names, times and ids it, never what a payload says.

// WithheldStatus is the status description of a failed span that Redact
// exports: the error's text is withheld, its code (Error) kept.
const WithheldStatus = "error (text withheld: payloads are encrypted)"

// keptAttributes are the span attributes Redact exports: toolgate's own
// (workflows.Attr…: names, ids, decisions and counts) and the ids the
// Temporal SDK's interceptor sets. Any other attribute — one added later
// included — is dropped until it is listed here.
var keptAttributes = map[attribute.Key]bool{
	workflows.AttrTurn: true, workflows.AttrCallID: true, workflows.AttrTool: true,
	workflows.AttrPlanStep: true, workflows.AttrPlanPlanner: true, workflows.AttrPlanCalls: true, workflows.AttrPlanAnswered: true,
	workflows.AttrDestructive: true, workflows.AttrGateDecision: true, workflows.AttrGateRule: true,
	workflows.AttrGateApprover: true, workflows.AttrGateWaited: true,
	workflows.AttrMemo:      true,
	workflows.AttrRunStatus: true, workflows.AttrRunAttempts: true, workflows.AttrRunRound: true, workflows.AttrRunLocal: true,
	workflows.AttrFallbackFrom: true, workflows.AttrFallbackTo: true, workflows.AttrFallbackCallID: true, workflows.AttrFallbackStatus: true,
	// The SDK's interceptor (go.temporal.io/sdk/interceptor, its tag keys).
	"temporalWorkflowID": true, "temporalRunID": true, "temporalActivityID": true, "temporalUpdateID": true,
}

// exceptionEvent and exceptionType are the OpenTelemetry names of an error
// recorded on a span (RecordError) and of its error's Go type, which
// Redact keeps; the event's exception.message and exception.stacktrace it
// drops.
const (
	exceptionEvent = "exception"
	exceptionType  = attribute.Key("exception.type")
)

// Redact returns an exporter that exports spans through exp without what
// could quote a payload: a failed span keeps its Error code, its status
// description becomes WithheldStatus; of its events only those of a
// recorded error are kept, with the error's type alone (no message, no
// stack trace); of its attributes only toolgate's own and the SDK's ids;
// its links keep the span they point to, without attributes. Names, ids,
// kinds, times, the resource and the instrumentation scope pass as they
// are. What is dropped is counted as dropped (DroppedAttributes,
// DroppedEvents), so a reader sees that something was left out.
//
// Use it whenever the worker's client has a codec (toolgate does, for
// --encryption-key-file: OTLP with Encrypted).
func Redact(exp sdktrace.SpanExporter) sdktrace.SpanExporter { return redactingExporter{exp} }

type redactingExporter struct{ sdktrace.SpanExporter }

func (r redactingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		out[i] = redacted{s}
	}
	return r.SpanExporter.ExportSpans(ctx, out)
}

// redacted is a span as Redact exports it.
type redacted struct{ sdktrace.ReadOnlySpan }

func (s redacted) Status() sdktrace.Status {
	st := s.ReadOnlySpan.Status()
	if st.Code == codes.Error {
		st.Description = WithheldStatus
	} else {
		st.Description = ""
	}
	return st
}

func (s redacted) Attributes() []attribute.KeyValue { return keep(s.ReadOnlySpan.Attributes()) }

func (s redacted) DroppedAttributes() int {
	all := s.ReadOnlySpan.Attributes()
	return s.ReadOnlySpan.DroppedAttributes() + len(all) - len(keep(all))
}

func (s redacted) Events() []sdktrace.Event {
	var out []sdktrace.Event
	for _, e := range s.ReadOnlySpan.Events() {
		if e.Name != exceptionEvent {
			continue
		}
		var attrs []attribute.KeyValue
		for _, a := range e.Attributes {
			if a.Key == exceptionType {
				attrs = append(attrs, a)
			}
		}
		out = append(out, sdktrace.Event{Name: e.Name, Time: e.Time, Attributes: attrs,
			DroppedAttributeCount: e.DroppedAttributeCount + len(e.Attributes) - len(attrs)})
	}
	return out
}

func (s redacted) DroppedEvents() int {
	return s.ReadOnlySpan.DroppedEvents() + len(s.ReadOnlySpan.Events()) - len(s.Events())
}

func (s redacted) Links() []sdktrace.Link {
	links := s.ReadOnlySpan.Links()
	out := make([]sdktrace.Link, len(links))
	for i, l := range links {
		out[i] = sdktrace.Link{SpanContext: l.SpanContext, DroppedAttributeCount: l.DroppedAttributeCount + len(l.Attributes)}
	}
	return out
}

// keep is the attributes of attrs that keptAttributes lists.
func keep(attrs []attribute.KeyValue) []attribute.KeyValue {
	var out []attribute.KeyValue
	for _, a := range attrs {
		if keptAttributes[a.Key] {
			out = append(out, a)
		}
	}
	return out
}
