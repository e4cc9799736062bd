// Package tracingtest is an OTLP/gRPC trace collector for tests: it serves on
// a free loopback port and keeps every span it receives, with its resource
// and scope.
package tracingtest

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// Collector keeps the spans it receives, in the order they arrive.
type Collector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu       sync.Mutex
	spans    []span
	requests []*coltracepb.ExportTraceServiceRequest // as received
}

type span struct {
	service, name string
	pb            *tracepb.Span
}

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
	req = proto.Clone(req).(*coltracepb.ExportTraceServiceRequest)
	c.requests = append(c.requests, req)
	for _, rs := range req.GetResourceSpans() {
		var service string
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, span{service: service, name: s.GetName(), pb: s})
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

// Spans are the spans service sent, in the order they arrived (not to be
// changed).
func (c *Collector) Spans(service string) []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range c.spans {
		if s.service == service {
			out = append(out, s.pb)
		}
	}
	return out
}

// Find lists where text occurs in what the collector received, one
// "span name: field" for each span field that holds it (name, status,
// attributes, events, links, trace state) and one "resource" or "scope"
// for those. Anywhere else in a request (not one of those fields) is
// "request".
func (c *Collector) Find(text string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	has := func(m proto.Message) bool { return strings.Contains(prototext.Format(m), text) }
	var out []string
	for _, req := range c.requests {
		found := len(out)
		for _, rs := range req.GetResourceSpans() {
			if has(rs.GetResource()) {
				out = append(out, "resource")
			}
			for _, ss := range rs.GetScopeSpans() {
				if has(ss.GetScope()) {
					out = append(out, "scope")
				}
				for _, s := range ss.GetSpans() {
					for field, m := range map[string]proto.Message{
						"status": s.GetStatus(), "attributes": &tracepb.Span{Attributes: s.GetAttributes()},
						"events": &tracepb.Span{Events: s.GetEvents()}, "links": &tracepb.Span{Links: s.GetLinks()},
					} {
						if has(m) {
							out = append(out, s.GetName()+": "+field)
						}
					}
					if strings.Contains(s.GetName(), text) || strings.Contains(s.GetTraceState(), text) {
						out = append(out, s.GetName()+": name or trace state")
					}
				}
			}
		}
		if len(out) == found && has(req) {
			out = append(out, "request")
		}
	}
	return out
}
