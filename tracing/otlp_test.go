package tracing_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tracing"
	"github.com/toolgate/toolgate/tracing/tracingtest"
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

// OTLP exports to the collector, and Shutdown sends what is still queued
// (the batch would otherwise wait up to five seconds).
func TestOTLPExportsAndShutdownFlushes(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	c, addr := tracingtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp, err := tracing.OTLP(ctx, "http://"+addr, false)
	require.NoError(t, err)
	_, span := tp.Tracer("test").Start(ctx, "toolgate.test")
	span.End()
	require.Empty(t, c.Received(), "nothing sent before the batch is due")
	require.NoError(t, tp.Shutdown(ctx))
	require.Equal(t, []string{tracing.ServiceName + "/toolgate.test"}, c.Received())
}

func TestOTLPRefusesABadEndpoint(t *testing.T) {
	_, err := tracing.OTLP(context.Background(), "collector", true)
	require.ErrorContains(t, err, "want host:port")
}

// OTEL_SERVICE_NAME names the service in place of toolgate.
func TestOTLPServiceNameFromTheEnvironment(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "desk-worker")
	c, addr := tracingtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp, err := tracing.OTLP(ctx, addr, true)
	require.NoError(t, err)
	_, span := tp.Tracer("test").Start(ctx, "toolgate.test")
	span.End()
	require.NoError(t, tp.Shutdown(ctx))
	require.Equal(t, []string{"desk-worker/toolgate.test"}, c.Received())
}
