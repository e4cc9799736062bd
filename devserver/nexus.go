package devserver

import (
	"context"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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
