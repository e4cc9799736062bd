package devserver

import (
	"context"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrNexusUnderTLS is why Start refuses Options.Nexus with Options.TLS:
// under TLS the server's own parts use a plaintext internal frontend, and its
// history service sends Nexus requests in plaintext to that frontend's HTTP
// port, which server v1.32 serves with the public frontend's TLS settings, so
// every operation would time out (seen: "client sent an HTTP request to an
// HTTPS server").
const ErrNexusUnderTLS = "devserver: Nexus is not served under TLS: the embedded server's history sends Nexus requests in plaintext to an internal frontend that answers only TLS; " +
	"serve Nexus from a server without --tls-* (on 127.0.0.1), or from a Temporal cluster of yours"

// NexusOnly is the frontend interceptor of a server that serves its HTTP
// port for Nexus alone (Options.Nexus without Options.HTTPAPI): it refuses
// every call that came through the HTTP/JSON API (the gateway marks each
// with the path pattern it matched), and lets every gRPC call through. The
// HTTP/JSON API has no authentication and parses a cross-origin text/plain
// POST as JSON: served, any web page open in the operator's browser could
// start, signal or update workflows — approve a call — through it.
func NexusOnly(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if pattern, ok := runtime.HTTPPathPattern(ctx); ok {
		return nil, status.Errorf(codes.PermissionDenied,
			"the HTTP/JSON API of this toolgate dev server is off (%s %s): its HTTP port serves Nexus requests only; use gRPC", info.FullMethod, pattern)
	}
	return h(ctx, req)
}
