package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// MetricsReportInterval is how often counters reach the endpoint: a value
// counted now is scraped at most this much later.
const MetricsReportInterval = time.Second

// Prometheus serves a worker's metrics for Prometheus at
// http://<Address>/metrics: the SDK's own (temporal_*: polls, task latencies,
// activity and workflow outcomes, requests) and toolgate's, which every run
// counts through workflow.GetMetricsHandler (workflows.MetricPrefix).
//
// Names follow Prometheus conventions (the SDK's tally contrib naming scope):
// a counter ends in _total and a timer in _seconds (a histogram). So the
// trace status counters are scraped as
//
//	toolgate_ok_total, toolgate_cache_hit_total, toolgate_cache_miss_total,
//	toolgate_blocked_total, toolgate_approved_total, toolgate_rejected_total,
//	toolgate_expired_total, toolgate_interrupted_total, toolgate_error_total,
//	toolgate_fallback_total, toolgate_retry_total
//
// each with the labels tool, namespace, task_queue and workflow_type (and the
// SDK's client_name, worker_type and activity_type, "none" on a workflow's
// metrics). Label values are sanitized to [A-Za-z0-9_] (the activity type
// plan.support is plan_support). A workflow replaying its history (after a worker restart or a
// cache eviction) counts nothing: the SDK's handler drops metrics on replay.
//
// Give Handler to client.Options.MetricsHandler of the client the worker
// runs on.
type Prometheus struct {
	handler client.MetricsHandler
	scope   io.Closer
	server  *http.Server
	address string
	served  chan error
}

// Metrics starts serving Prometheus metrics at addr (host:port; port 0 picks
// a free port, see Address). Stop it when the worker has stopped.
func Metrics(addr string) (*Prometheus, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics endpoint: %w", err)
	}
	registry := prom.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:       registry,
		DefaultTimerType: tallyprom.HistogramTimerType,
		// The default panics; a metric that cannot be registered (the same
		// name with other labels) is dropped, and said so.
		OnRegisterError: func(err error) { slog.Warn("metrics: dropping a metric", "error", err.Error()) },
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, MetricsReportInterval)
	mux := http.NewServeMux()
	mux.Handle("/metrics", reporter.HTTPHandler())
	p := &Prometheus{
		handler: sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)),
		scope:   closer,
		server:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		address: ln.Addr().String(),
		served:  make(chan error, 1),
	}
	go func() { p.served <- p.server.Serve(ln) }()
	return p, nil
}

// Handler is the SDK metrics handler whose metrics the endpoint serves. On a
// nil *Prometheus (no endpoint asked for) it is nil: the SDK's no-op handler.
func (p *Prometheus) Handler() client.MetricsHandler {
	if p == nil {
		return nil
	}
	return p.handler
}

// Address is the endpoint's host:port.
func (p *Prometheus) Address() string { return p.address }

// URL is the address to scrape: http://<Address>/metrics.
func (p *Prometheus) URL() string { return "http://" + p.address + "/metrics" }

// Stop stops serving and reporting. On a nil *Prometheus it does nothing.
func (p *Prometheus) Stop(ctx context.Context) error {
	if p == nil {
		return nil
	}
	err := p.server.Shutdown(ctx)
	if serveErr := <-p.served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return errors.Join(err, p.scope.Close())
}
