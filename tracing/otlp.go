package tracing

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ServiceName is the service.name of the spans OTLP exports, unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name another.
const ServiceName = "toolgate"

// Option changes what OTLP exports.
type Option func(*options)

type options struct{ encrypted bool }

// Encrypted says the worker's payloads are encrypted (its client has a
// codec): the spans are exported through Redact, without error texts or
// any attribute but toolgate's own and the SDK's ids.
func Encrypted() Option { return func(o *options) { o.encrypted = true } }

// OTLP returns a TracerProvider that exports spans in batches to the
// OTLP/gRPC collector at endpoint: "host:port" (TLS with the host's root
// certificates, or plaintext when insecure), "http://host:port" (plaintext)
// or "https://host:port" (TLS). It does not connect until it exports, and a
// collector that is down costs spans, never a workflow task: spans are
// queued, and dropped when the queue is full.
//
// The OTEL_EXPORTER_OTLP_* environment variables (headers, certificate,
// timeout, compression) apply too; endpoint and insecure win over theirs.
// With Encrypted, every span goes out through Redact.
// Call Shutdown once the worker has stopped: it sends the spans still queued.
func OTLP(ctx context.Context, endpoint string, insecure bool, opts ...Option) (*sdktrace.TracerProvider, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	hostport, plain, err := Target(endpoint, insecure)
	if err != nil {
		return nil, err
	}
	gopts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(hostport)}
	if plain {
		gopts = append(gopts, otlptracegrpc.WithInsecure())
	}
	var exp sdktrace.SpanExporter
	exp, err = otlptracegrpc.New(ctx, gopts...)
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter for %s: %w", endpoint, err)
	}
	if o.encrypted {
		exp = Redact(exp)
	}
	// Later options win: the environment may rename the service.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", ServiceName)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("OTLP resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// Target reads an OTLP/gRPC endpoint as OTLP does: the collector's host:port,
// and whether to connect in plaintext (insecure, or an http:// endpoint).
func Target(endpoint string, insecure bool) (hostport string, plain bool, err error) {
	hostport, plain = endpoint, insecure
	if scheme, rest, ok := strings.Cut(endpoint, "://"); ok {
		switch scheme {
		case "http":
			plain = true
		case "https":
			if insecure {
				return "", false, fmt.Errorf("OTLP endpoint %q: https:// asks for TLS, insecure for plaintext: say one", endpoint)
			}
		default:
			return "", false, fmt.Errorf("OTLP endpoint %q: scheme %q: want host:port, http://host:port or https://host:port", endpoint, scheme)
		}
		hostport = strings.TrimSuffix(rest, "/")
	}
	host, port, err := net.SplitHostPort(hostport)
	if err == nil && host == "" {
		err = errors.New("no host")
	}
	if n, perr := strconv.Atoi(port); err == nil && (perr != nil || n < 1 || n > 65535) {
		err = fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	if err != nil {
		return "", false, fmt.Errorf("OTLP endpoint %q: want host:port (the collector's gRPC port, usually 4317): %w", endpoint, err)
	}
	return hostport, plain, nil
}
