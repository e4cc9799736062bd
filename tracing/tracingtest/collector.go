// Package tracingtest is an OTLP/gRPC trace collector for tests: it serves on
// a free loopback port and keeps the service and name of every span it
// receives.
package tracingtest

import (
	"context"
	"net"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// Collector keeps the spans it receives, in the order they arrive.
type Collector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []span
}

type span struct{ service, name string }

// Start serves a Collector on a free loopback port until the test ends and
// returns it with its host:port.
func Start(t testing.TB) (*Collector, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("tracingtest: listen: %v", err)
	}
	c := &Collector{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return c, ln.Addr().String()
}

// Export implements the OTLP trace service.
func (c *Collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
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
				c.spans = append(c.spans, span{service: service, name: s.GetName()})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Received lists "service/name" of every span received.
func (c *Collector) Received() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.spans))
	for i, s := range c.spans {
		out[i] = s.service + "/" + s.name
	}
	return out
}

// Names lists the names of the spans service sent.
func (c *Collector) Names(service string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.spans {
		if s.service == service {
			out = append(out, s.name)
		}
	}
	return out
}
