package tracing_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"github.com/toolgate/toolgate/tracing"
)

func TestTarget(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		insecure bool
		hostport string
		plain    bool
		err      string
	}{
		{endpoint: "collector:4317", hostport: "collector:4317"},
		{endpoint: "127.0.0.1:4317", insecure: true, hostport: "127.0.0.1:4317", plain: true},
		{endpoint: "http://127.0.0.1:4317", hostport: "127.0.0.1:4317", plain: true},
		{endpoint: "http://[::1]:4317/", hostport: "[::1]:4317", plain: true},
		{endpoint: "https://collector:4317", hostport: "collector:4317"},
		{endpoint: "https://collector:4317", insecure: true, err: "say one"},
		{endpoint: "grpc://collector:4317", err: `scheme "grpc"`},
		{endpoint: "collector", err: "want host:port"},
		{endpoint: ":4317", err: "no host"},
		{endpoint: "collector:otlp", err: "not a number"},
		{endpoint: "http://collector:4317/v1/traces", err: "not a number"},
	} {
		hostport, plain, err := tracing.Target(tc.endpoint, tc.insecure)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.endpoint)
			continue
		}
		require.NoError(t, err, tc.endpoint)
		require.Equal(t, tc.hostport, hostport, tc.endpoint)
		require.Equal(t, tc.plain, plain, tc.endpoint)
	}
}

// collector is an OTLP/gRPC trace collector that keeps what it receives.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.ResourceSpans
}

func (c *collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spans = append(c.spans, req.GetResourceSpans()...)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// received lists service name / span name of every span received.
func (c *collector) received() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, rs := range c.spans {
		var service string
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				out = append(out, service+"/"+s.GetName())
			}
		}
	}
	return out
}

// startCollector serves a collector on a free loopback port.
func startCollector(t *testing.T) (*collector, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &collector{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return c, ln.Addr().String()
}

// OTLP exports to the collector, and Shutdown sends what is still queued
// (the batch would otherwise wait up to five seconds).
func TestOTLPExportsAndShutdownFlushes(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	c, addr := startCollector(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp, err := tracing.OTLP(ctx, "http://"+addr, false)
	require.NoError(t, err)
	_, span := tp.Tracer("test").Start(ctx, "toolgate.test")
	span.End()
	require.Empty(t, c.received(), "nothing sent before the batch is due")
	require.NoError(t, tp.Shutdown(ctx))
	require.Equal(t, []string{tracing.ServiceName + "/toolgate.test"}, c.received())
}

func TestOTLPRefusesABadEndpoint(t *testing.T) {
	_, err := tracing.OTLP(context.Background(), "collector", true)
	require.ErrorContains(t, err, "want host:port")
}

// OTEL_SERVICE_NAME names the service in place of toolgate.
func TestOTLPServiceNameFromTheEnvironment(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "desk-worker")
	c, addr := startCollector(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp, err := tracing.OTLP(ctx, addr, true)
	require.NoError(t, err)
	_, span := tp.Tracer("test").Start(ctx, "toolgate.test")
	span.End()
	require.NoError(t, tp.Shutdown(ctx))
	require.Equal(t, []string{"desk-worker/toolgate.test"}, c.received())
}
