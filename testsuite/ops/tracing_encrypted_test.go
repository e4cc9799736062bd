package ops_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/tracing"
	"github.com/toolgate/toolgate/tracing/tracingtest"
	"github.com/toolgate/toolgate/workflows"
)

// Markers of the traced run: errMarker is an argument that close_ticket's
// error quotes ("ticket TKT-ZQX7731 not found"), outMarker a guest name
// that book_hotel's result holds.
const (
	errMarker = "TKT-ZQX7731"
	outMarker = "GuestQwv5520"
)

// writeMarkedPlan writes a run that books a stay for outMarker (a result
// holding it) and closes ticket errMarker (an error quoting it).
func writeMarkedPlan(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "marked.json")
	b := []byte(`{"goal":"book, then close","planner":{"kind":"scripted","answer":"done","turns":[` +
		`[{"tool":"book_hotel","args":{"guest":"` + outMarker + `","hotel":"Grand","nights":1}}],` +
		`[{"tool":"close_ticket","args":{"ticket_id":"` + errMarker + `"}}]]}}`)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// tracedMarkedRun runs writeMarkedPlan's run (approval always_approve) with
// the client commands (keyArgs: their --encryption-key-file, if any) until
// it completes, and checks that its trace shows the result and the error
// holding the markers.
func tracedMarkedRun(t *testing.T, address, id string, keyArgs ...string) {
	t.Helper()
	conn := append([]string{"--address", address}, keyArgs...)
	res := toolgate(t, append([]string{"run", "--id", id, "--plan", writeMarkedPlan(t), "--approval", "always_approve"}, conn...)...)
	require.Equal(t, 0, res.code, res.stderr)
	testenv.Eventually(t, time.Minute, id+" completed", func() error {
		res := toolgate(t, append([]string{"status", id}, conn...)...)
		if !strings.Contains(res.stdout, "status: completed") {
			return fmt.Errorf("status: %q %s", res.stdout, res.stderr)
		}
		return nil
	})
	tr := toolgate(t, append([]string{"trace", id, "--json"}, conn...)...)
	require.Equal(t, 0, tr.code, tr.stderr)
	require.Contains(t, tr.stdout, "ticket "+errMarker+" not found", "close_ticket's error quotes its argument")
	require.Contains(t, tr.stdout, `"guest": "`+outMarker+`"`, "book_hotel's result holds the guest")
}

// failedSpan is the first span named name that service toolgate sent, with
// its status; it fails the test if there is none or it did not fail.
func failedSpan(t *testing.T, c *tracingtest.Collector, name string) *tracepb.Span {
	t.Helper()
	for _, s := range c.Spans(tracing.ServiceName) {
		if s.GetName() == name {
			require.Equal(t, tracepb.Status_STATUS_CODE_ERROR, s.GetStatus().GetCode(), "%s failed", name)
			return s
		}
	}
	t.Fatalf("no span %s among %v", name, c.Received())
	return nil
}

// requireWithheld checks that the collector received the run's failed
// spans with their text withheld, and neither marker anywhere.
func requireWithheld(t *testing.T, c *tracingtest.Collector) {
	t.Helper()
	for _, name := range []string{"RunActivity:close_ticket", workflows.SpanRun} {
		var s *tracepb.Span
		for _, sp := range c.Spans(tracing.ServiceName) {
			if sp.GetName() == name && sp.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
				s = sp
			}
		}
		require.NotNil(t, s, "a failed %s span among %v", name, c.Received())
		require.Equal(t, tracing.WithheldStatus, s.GetStatus().GetMessage(), name)
		if name == "RunActivity:close_ticket" { // the SDK's record of the error: its type, not its text
			require.Len(t, s.GetEvents(), 1, name)
			e := s.GetEvents()[0]
			require.Equal(t, "exception", e.GetName())
			require.Len(t, e.GetAttributes(), 1)
			require.Equal(t, "exception.type", e.GetAttributes()[0].GetKey())
			require.NotZero(t, e.GetDroppedAttributesCount(), "exception.message, dropped")
		}
	}
	require.Empty(t, c.Find(errMarker), "where the collector got the error's argument %s", errMarker)
	require.Empty(t, c.Find(outMarker), "where the collector got the result's %s", outMarker)
}

// TestEncryptedTracing: with --encryption-key-file and --otlp-endpoint (on
// dev and on worker), a tool's error text, which quotes its arguments, and
// a tool's result reach the collector nowhere: not in a span's name,
// status, events, attributes or links, nor in the resource. The failed
// spans still say they failed, with a fixed text. Without a key file, the
// same run's error text does reach the collector (the spans' status and
// exception events): what is withheld is really there to withhold.
func TestEncryptedTracing(t *testing.T) {
	t.Run("dev", func(t *testing.T) {
		dir := t.TempDir()
		keys, _ := newKeyFile(t, dir)
		c, addr := tracingtest.Start(t)
		p := startToolgate(t, "dev", "--data", filepath.Join(dir, "data"), "--address", "127.0.0.1:0", "--allow-auto-approve",
			"--encryption-key-file", keys, "--otlp-endpoint", addr, "--otlp-insecure")
		require.Contains(t, p.waitLine(t, "traces to ", time.Minute), "payloads are encrypted, so spans carry no error text")
		address := strings.TrimPrefix(p.waitLine(t, "ready ", 2*time.Minute), "ready ")
		tracedMarkedRun(t, address, "traced-enc-dev", "--encryption-key-file", keys)
		p.stop(t) // sends the spans still queued
		requireWithheld(t, c)
	})
	t.Run("worker", func(t *testing.T) {
		dir := t.TempDir()
		keys, _ := newKeyFile(t, dir)
		c, addr := tracingtest.Start(t)
		srv, _ := startServer(t, nil)
		p := startToolgate(t, "worker", "--address", srv.Address(), "--data", filepath.Join(dir, "data"), "--allow-auto-approve",
			"--encryption-key-file", keys, "--otlp-endpoint", "http://"+addr)
		p.waitLine(t, "worker ready", time.Minute)
		tracedMarkedRun(t, srv.Address(), "traced-enc-worker", "--encryption-key-file", keys)
		p.stop(t)
		requireWithheld(t, c)
	})
	t.Run("worker without a key", func(t *testing.T) {
		c, addr := tracingtest.Start(t)
		srv, _ := startServer(t, nil)
		p := startToolgate(t, "worker", "--address", srv.Address(), "--data", t.TempDir(), "--allow-auto-approve",
			"--otlp-endpoint", "http://"+addr)
		p.waitLine(t, "worker ready", time.Minute)
		tracedMarkedRun(t, srv.Address(), "traced-plain-worker")
		p.stop(t)
		require.Contains(t, failedSpan(t, c, "RunActivity:close_ticket").GetStatus().GetMessage(), errMarker)
		require.Contains(t, c.Find(errMarker), "RunActivity:close_ticket: events", "the SDK's exception event quotes the error")
	})
}
