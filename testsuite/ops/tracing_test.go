package ops_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/grpc"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/demo"
	"github.com/toolgate/toolgate/tracing"
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

// collector is an OTLP/gRPC trace collector that keeps the names of the
// spans it receives, by service.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names map[string][]string // service.name -> span names
}

func (c *collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		var service string
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.names[service] = append(c.names[service], s.GetName())
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// toolgateSpans lists the toolgate.* spans service toolgate sent, in order.
func (c *collector) toolgateSpans() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, n := range c.names[tracing.ServiceName] {
		if strings.HasPrefix(n, "toolgate.") {
			out = append(out, n)
		}
	}
	return out
}

func (c *collector) has(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.names[tracing.ServiceName] {
		if n == name {
			return true
		}
	}
	return false
}

// startCollector serves a collector on a free loopback port.
func startCollector(t *testing.T) (*collector, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &collector{names: map[string][]string{}}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return c, ln.Addr().String()
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
		c, addr := startCollector(t)
		p := startToolgate(t, "dev", "--data", t.TempDir(), "--address", "127.0.0.1:0", "--otlp-endpoint", addr, "--otlp-insecure")
		require.Equal(t, "traces to "+addr+" (OTLP/gRPC, plaintext)", p.waitLine(t, "traces to ", time.Minute))
		address := strings.TrimPrefix(p.waitLine(t, "ready ", 2*time.Minute), "ready ")
		walkThrough(t, address, "otlp-dev")
		p.stop(t)
		require.Equal(t, seedSpanNames(), c.toolgateSpans())
		require.True(t, c.has("RunWorkflow:"+workflows.WorkflowName), "the SDK's spans: %v", c.names)
	})
	t.Run("worker", func(t *testing.T) {
		c, addr := startCollector(t)
		srv, _ := startServer(t, nil)
		p := startToolgate(t, "worker", "--address", srv.Address(), "--data", t.TempDir(), "--otlp-endpoint", "http://"+addr)
		require.Equal(t, "traces to "+addr+" (OTLP/gRPC, plaintext)", p.waitLine(t, "traces to ", time.Minute))
		p.waitLine(t, "worker ready", time.Minute)
		walkThrough(t, srv.Address(), "otlp-worker")
		p.stop(t)
		require.Equal(t, seedSpanNames(), c.toolgateSpans())
		require.True(t, c.has("StartActivity:search_tickets") && c.has("RunActivity:search_tickets"), "the SDK's spans: %v", c.names)
	})
}
