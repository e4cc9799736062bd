package ops_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	sdkworker "go.temporal.io/sdk/worker"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/demo"
	"github.com/toolgate/toolgate/tracing"
	"github.com/toolgate/toolgate/tracing/tracingtest"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// seedSpans are toolgate's spans of the seed walk-through, "name call_id", in
// the order they end: each step once, however often the run was replayed.
var seedSpans = []string{
	"toolgate.plan ", "toolgate.gate c-1", "toolgate.memo c-1", "toolgate.run c-1",
	"toolgate.plan ", "toolgate.gate c-2", "toolgate.memo c-2",
	"toolgate.plan ", "toolgate.gate c-3", "toolgate.run c-3",
	"toolgate.plan ",
}

// TestWorkerTracing: a worker with tracing.Interceptors reports each step of
// the seed walk-through once, as children of the SDK's workflow span, even
// when the run is rebuilt from its history in the middle: the worker's cache
// is purged while c-3 waits at the gate, so the approval's workflow task
// replays the whole history, and the gate step that began before the purge
// is reported once, from the time the history says it began.
func TestWorkerTracing(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ics, err := tracing.Interceptors(tp)
	require.NoError(t, err)
	_, cl := startServer(t, nil)
	opts, desk, err := demo.Options(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = desk.Close() })
	opts.Interceptors = ics
	w, err := worker.Start(cl, workflows.TaskQueue, opts)
	require.NoError(t, err)
	t.Cleanup(w.Stop)

	wr := startRun(t, cl, "traced-seed", seedRun())
	it := waitPending(t, cl, "traced-seed", "c-3")
	sdkworker.PurgeStickyWorkflowCache()
	approvedAt := time.Now()
	_, err = tgclient.New(cl).Decide(context.Background(), "traced-seed", true,
		workflows.DecisionInput{CallID: "c-3", Approver: "alice", ArgsDigest: it.ArgsDigest, Kind: it.Kind})
	require.NoError(t, err)
	require.Equal(t, workflows.StatusCompleted, result(t, wr).Status)

	workflowSpans := map[string]bool{} // span ids of the SDK's RunWorkflow spans
	var got []string
	var gate sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "RunWorkflow:"+workflows.WorkflowName {
			workflowSpans[s.SpanContext().SpanID().String()] = true
		}
	}
	for _, s := range rec.Ended() {
		if !strings.HasPrefix(s.Name(), "toolgate.") {
			continue
		}
		var callID string
		for _, a := range s.Attributes() {
			if a.Key == workflows.AttrCallID {
				callID = a.Value.AsString()
			}
		}
		got = append(got, s.Name()+" "+callID)
		require.True(t, workflowSpans[s.Parent().SpanID().String()], "%s %s: a child of a RunWorkflow span", s.Name(), callID)
		if s.Name() == workflows.SpanGate && callID == "c-3" {
			gate = s
		}
	}
	require.Equal(t, seedSpans, got)
	require.True(t, gate.StartTime().Before(approvedAt), "c-3's gate span starts when the gate began: %v", gate.StartTime())
	require.False(t, gate.EndTime().Before(approvedAt), "c-3's gate span ends with the approval: %v", gate.EndTime())
	require.Contains(t, gate.Attributes(), workflows.AttrGateApprover.String("alice"))
	require.Contains(t, gate.Attributes(), workflows.AttrGateWaited.Bool(true))
}

// toolgateSpans lists the toolgate.* spans service toolgate sent to c, in order.
func toolgateSpans(c *tracingtest.Collector) []string {
	var out []string
	for _, n := range c.Names(tracing.ServiceName) {
		if strings.HasPrefix(n, "toolgate.") {
			out = append(out, n)
		}
	}
	return out
}

// seedSpanNames are seedSpans' names.
func seedSpanNames() []string {
	out := make([]string, len(seedSpans))
	for i, s := range seedSpans {
		out[i], _, _ = strings.Cut(s, " ")
	}
	return out
}

// TestOTLPEndpointFlag: `toolgate dev --otlp-endpoint` and `toolgate worker
// --otlp-endpoint` send the seed walk-through's spans to the collector; the
// last of them are sent when the command stops (Ctrl-C).
func TestOTLPEndpointFlag(t *testing.T) {
	t.Run("dev", func(t *testing.T) {
		c, addr := tracingtest.Start(t)
		p := startToolgate(t, "dev", "--data", t.TempDir(), "--address", "127.0.0.1:0", "--otlp-endpoint", addr, "--otlp-insecure")
		require.Equal(t, "traces to "+addr+" (OTLP/gRPC, plaintext)", p.waitLine(t, "traces to ", time.Minute))
		address := strings.TrimPrefix(p.waitLine(t, "ready ", 2*time.Minute), "ready ")
		walkThrough(t, address, "otlp-dev")
		p.stop(t)
		require.Equal(t, seedSpanNames(), toolgateSpans(c))
		require.True(t, slices.Contains(c.Names(tracing.ServiceName), "RunWorkflow:"+workflows.WorkflowName), "the SDK's spans: %v", c.Received())
	})
	t.Run("worker", func(t *testing.T) {
		c, addr := tracingtest.Start(t)
		srv, _ := startServer(t, nil)
		p := startToolgate(t, "worker", "--address", srv.Address(), "--data", t.TempDir(), "--otlp-endpoint", "http://"+addr)
		require.Equal(t, "traces to "+addr+" (OTLP/gRPC, plaintext)", p.waitLine(t, "traces to ", time.Minute))
		p.waitLine(t, "worker ready", time.Minute)
		walkThrough(t, srv.Address(), "otlp-worker")
		p.stop(t)
		require.Equal(t, seedSpanNames(), toolgateSpans(c))
		require.True(t, slices.Contains(c.Names(tracing.ServiceName), "StartActivity:search_tickets") && slices.Contains(c.Names(tracing.ServiceName), "RunActivity:search_tickets"), "the SDK's spans: %v", c.Received())
	})
}
