package tracing_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/tracing"
	"github.com/toolgate/toolgate/workflows"
)

// Redact exports a failed span with its code and a fixed text for status,
// its error's type without message or stack trace, toolgate's attributes
// and the SDK's ids only, links without attributes; nothing of the secret
// the error, an attribute, an event or a link carried.
func TestRedact(t *testing.T) {
	const secret = "TKT-SECRET-4417"
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracing.Redact(mem)))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := tp.Tracer("test")

	_, linked := tr.Start(context.Background(), "linked")
	linked.End()
	_, sp := tr.Start(context.Background(), "RunActivity:close_ticket", trace.WithLinks(
		trace.Link{SpanContext: linked.SpanContext(), Attributes: []attribute.KeyValue{attribute.String("why", secret)}}))
	sp.SetAttributes(workflows.AttrTool.String("close_ticket"), workflows.AttrCallID.String("c-3"),
		attribute.String("temporalWorkflowID", "run-1"), attribute.String("temporalActivityID", "c-3"),
		attribute.String("args", `{"ticket_id":"`+secret+`"}`))
	sp.AddEvent("note", trace.WithAttributes(attribute.String("said", secret)))
	sp.RecordError(fmt.Errorf("close_ticket: ticket %s not found", secret), trace.WithStackTrace(true))
	sp.SetStatus(codes.Error, "ticket "+secret+" not found")
	sp.End()
	_, ok := tr.Start(context.Background(), "toolgate.memo")
	ok.SetStatus(codes.Ok, "fine: "+secret) // an Ok status's text is dropped too (the SDK keeps none anyway)
	ok.End()

	spans := mem.GetSpans()
	require.Len(t, spans, 3)
	got := spans[1]
	require.Equal(t, "RunActivity:close_ticket", got.Name)
	require.Equal(t, sdktrace.Status{Code: codes.Error, Description: tracing.WithheldStatus}, got.Status)
	require.ElementsMatch(t, []attribute.KeyValue{workflows.AttrTool.String("close_ticket"), workflows.AttrCallID.String("c-3"),
		attribute.String("temporalWorkflowID", "run-1"), attribute.String("temporalActivityID", "c-3")}, got.Attributes)
	require.Equal(t, 1, got.DroppedAttributes, "the args attribute, counted as dropped")
	require.Len(t, got.Events, 1)
	require.Equal(t, "exception", got.Events[0].Name)
	require.Equal(t, []attribute.KeyValue{attribute.String("exception.type", "*errors.errorString")}, got.Events[0].Attributes)
	require.Equal(t, 2, got.Events[0].DroppedAttributeCount, "exception.message and exception.stacktrace")
	require.Equal(t, 1, got.DroppedEvents, "the note")
	require.Len(t, got.Links, 1)
	require.Equal(t, linked.SpanContext(), got.Links[0].SpanContext)
	require.Empty(t, got.Links[0].Attributes)
	require.Equal(t, codes.Ok, spans[2].Status.Code)
	require.Empty(t, spans[2].Status.Description)
	for _, s := range spans {
		require.NotContains(t, fmt.Sprintf("%+v", s), secret, "span %s", s.Name)
	}
}

// Without Redact the same error text reaches the exporter: what TestRedact
// withholds is really there to withhold.
func TestUnredactedSpanCarriesTheErrorText(t *testing.T) {
	const secret = "TKT-SECRET-4417"
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(mem))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	_, sp := tp.Tracer("test").Start(context.Background(), "RunActivity:close_ticket")
	err := errors.New("ticket " + secret + " not found")
	sp.RecordError(err)
	sp.SetStatus(codes.Error, err.Error())
	sp.End()
	require.Contains(t, fmt.Sprintf("%+v", mem.GetSpans()[0]), secret)
}
