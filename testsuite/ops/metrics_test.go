package ops_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"
	sdkworker "go.temporal.io/sdk/worker"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// scrape reads and parses a Prometheus text endpoint.
func scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var p expfmt.TextParser
	return p.TextToMetricFamilies(resp.Body)
}

// counter sums the counter name over the series whose labels include want.
func counter(families map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	for _, m := range families[name].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range want {
			ok = ok && labels[k] == v
		}
		if ok {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// expect is one counter value the seed walk-through must leave.
type expect struct {
	name, tool string
	value      float64
}

// seedCounts are the counters of the seed's walk-through (search, search
// again, close approved): the exporter's names, with the _total suffix.
var seedCounts = []expect{
	{"toolgate_ok_total", "search_tickets", 1},
	{"toolgate_cache_miss_total", "search_tickets", 1},
	{"toolgate_cache_hit_total", "search_tickets", 1},
	{"toolgate_blocked_total", "close_ticket", 1},
	{"toolgate_approved_total", "close_ticket", 1},
	{"toolgate_ok_total", "close_ticket", 1},
}

// absent are counters the walk-through never touches.
var absent = []string{"toolgate_rejected_total", "toolgate_expired_total", "toolgate_interrupted_total",
	"toolgate_error_total", "toolgate_fallback_total", "toolgate_retry_total"}

// metricsShow waits until the endpoint shows the seed walk-through's counts
// (they reach it within worker.MetricsReportInterval), then checks them all.
func metricsShow(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	var families map[string]*dto.MetricFamily
	testenv.Eventually(t, 15*time.Second, url+" showing the walk-through's counts", func() error {
		var err error
		if families, err = scrape(url); err != nil {
			return err
		}
		if got := counter(families, "toolgate_ok_total", map[string]string{"tool": "close_ticket"}); got != 1 {
			return fmt.Errorf("toolgate_ok_total{tool=close_ticket} = %v", got)
		}
		return nil
	})
	totals := map[string]float64{}
	for _, e := range seedCounts {
		require.Equal(t, e.value, counter(families, e.name, map[string]string{"tool": e.tool}), "%s{tool=%q}", e.name, e.tool)
		totals[e.name] += e.value
	}
	for name, total := range totals {
		require.Equal(t, total, counter(families, name, nil), "%s counts tools it should not", name)
	}
	for _, name := range absent {
		require.NotContains(t, families, name)
	}
	return families
}

// TestWorkerMetrics: a worker whose client reports to worker.Metrics serves
// the trace counters of its runs (and the SDK's own metrics) for Prometheus.
// A run replayed from its history (the worker's cache purged before the
// approval) counts nothing twice.
func TestWorkerMetrics(t *testing.T) {
	m, err := worker.Metrics("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Stop(context.Background())) })
	require.Equal(t, "http://"+m.Address()+"/metrics", m.URL())
	_, cl := startServer(t, m.Handler())
	startWorker(t, cl, false)

	wr := startRun(t, cl, "metrics-seed", seedRun())
	it := waitPending(t, cl, "metrics-seed", "c-3")
	// Evict the run from the worker's cache: the approval's workflow task then
	// replays the whole history, and the counters must not count it again.
	sdkworker.PurgeStickyWorkflowCache()
	_, err = tgclient.New(cl).Decide(context.Background(), "metrics-seed", true,
		workflows.DecisionInput{CallID: "c-3", Approver: "alice", ArgsDigest: it.ArgsDigest, Kind: it.Kind})
	require.NoError(t, err)
	require.Equal(t, workflows.StatusCompleted, result(t, wr).Status)

	families := metricsShow(t, m.URL())
	// The purge did make the worker replay the run from its history.
	require.GreaterOrEqual(t, counter(families, "temporal_sticky_cache_miss_total", map[string]string{"workflow_type": "AgentRun"}), float64(1))
	// The labels each toolgate counter carries.
	ok := families["toolgate_ok_total"].GetMetric()
	require.NotEmpty(t, ok)
	var names []string
	for _, l := range ok[0].GetLabel() {
		names = append(names, l.GetName()+"="+l.GetValue())
	}
	require.Subset(t, names, []string{"namespace=default", "task_queue=toolgate", "workflow_type=AgentRun"})
	// The SDK's own metrics are there too.
	require.Equal(t, float64(1), counter(families, "temporal_workflow_completed_total", map[string]string{"workflow_type": "AgentRun"}))
	require.Contains(t, families, "temporal_activity_execution_latency_seconds")
}

// writePlan writes the seed walk-through as a --plan file.
func writePlan(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "seed.json")
	b := []byte(`{"goal":"find the login ticket and close it","planner":{"kind":"scripted","answer":"closed TKT-3","turns":[` +
		`[{"tool":"search_tickets","args":{"query":"login"}}],` +
		`[{"tool":"search_tickets","args":{"query":"login"}}],` +
		`[{"tool":"close_ticket","args":{"ticket_id":"TKT-3"}}]]}}`)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// walkThrough runs the seed walk-through with the toolgate client commands
// against the server at address: run, approve c-3, wait for the end.
func walkThrough(t *testing.T, address, id string) {
	t.Helper()
	res := toolgate(t, "run", "--id", id, "--plan", writePlan(t), "--address", address)
	require.Equal(t, 0, res.code, res.stderr)
	testenv.Eventually(t, 30*time.Second, id+" waiting at the gate for close_ticket", func() error {
		res := toolgate(t, "next", id, "--address", address)
		if strings.TrimSpace(res.stdout) != "gate:close_ticket" {
			return fmt.Errorf("next: %q %s", res.stdout, res.stderr)
		}
		return nil
	})
	res = toolgate(t, "approve", id, "c-3", "--as", "alice", "--address", address)
	require.Equal(t, 0, res.code, res.stderr)
	testenv.Eventually(t, 30*time.Second, id+" completed", func() error {
		res := toolgate(t, "status", id, "--address", address)
		if !strings.Contains(res.stdout, "status: completed") {
			return fmt.Errorf("status: %q %s", res.stdout, res.stderr)
		}
		return nil
	})
}

// metricsURL reads the endpoint from the "metrics at URL" line.
func metricsURL(t *testing.T, p *process) string {
	t.Helper()
	url := strings.TrimPrefix(p.waitLine(t, "metrics at ", time.Minute), "metrics at ")
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:") && strings.HasSuffix(url, "/metrics"), url)
	return url
}

// TestMetricsAddressFlag: `toolgate dev --metrics-address` and `toolgate
// worker --metrics-address` serve the worker's metrics.
func TestMetricsAddressFlag(t *testing.T) {
	t.Run("dev", func(t *testing.T) {
		p := startToolgate(t, "dev", "--data", t.TempDir(), "--address", "127.0.0.1:0", "--metrics-address", "127.0.0.1:0")
		url := metricsURL(t, p)
		address := strings.TrimPrefix(p.waitLine(t, "ready ", 2*time.Minute), "ready ")
		walkThrough(t, address, "flag-dev")
		metricsShow(t, url)
		p.stop(t)
		_, err := http.Get(url)
		require.Error(t, err, "the endpoint stops with the command")
	})
	t.Run("worker", func(t *testing.T) {
		srv, _ := startServer(t, nil)
		p := startToolgate(t, "worker", "--address", srv.Address(), "--data", t.TempDir(), "--search-attributes", "--metrics-address", "127.0.0.1:0")
		url := metricsURL(t, p)
		p.waitLine(t, "worker ready", time.Minute)
		walkThrough(t, srv.Address(), "flag-worker")
		metricsShow(t, url)
	})
}
