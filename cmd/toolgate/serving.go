package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/permit"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/remotetools"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/tracing"
	"github.com/toolgate/toolgate/worker"
)

// serving holds the flags dev and worker share.
type serving struct {
	allowAuto    *bool
	metricsAddr  *string
	otlpEndpoint *string
	otlpInsecure *bool
	policyFile   *string
	mcpFile      *string
	toolsFile    *string
	deskDB       *string
	notifyFile   *string
	ledgerRun    *int
	workerKey    *string
}

func servingFlags(fs *flag.FlagSet) serving {
	return serving{
		allowAuto:   fs.Bool("allow-auto-approve", false, "let clients start runs with approval always_approve"),
		metricsAddr: fs.String("metrics-address", "", "serve the worker's Prometheus metrics at http://HOST:PORT/metrics (empty: none)"),
		otlpEndpoint: fs.String("otlp-endpoint", "", "export the worker's OpenTelemetry traces (the SDK's spans and toolgate's plan, gate, memo, run, fallback) "+
			"to the OTLP/gRPC collector at HOST:PORT, over TLS unless --otlp-insecure or given as http://HOST:PORT (empty: no tracing); "+
			"with --encryption-key-file, spans carry no error text and no attributes but toolgate's own and the SDK's ids"),
		otlpInsecure: fs.Bool("otlp-insecure", false, "with --otlp-endpoint: connect to the collector in plaintext, without TLS"),
		policyFile:   fs.String("policy", "", "the approval policy (YAML or JSON): who may decide, with their public keys, and by which rules; with one, decisions must be signed"),
		mcpFile:      mcpFlag(fs),
		toolsFile: fs.String("tools", "", "a tools file (YAML, examples/tools-remote.yaml): tools other workers host on their own task queues, "+
			"declared here (destructive, schema, memo, retries), gated as the worker's own"),
		notifyFile: fs.String("notify", "", "tell people of waiting calls, decisions and runs' ends: a notify file (YAML) of webhook, Slack and e-mail targets (docs/notifications.md)"),
		deskDB:     fs.String("desk-db", "", "the demo desk's database: empty for desk.db under --data (SQLite), or postgres://USER[:PASSWORD]@HOST:PORT/DB?sslmode=disable, which every worker on it shares"),
		ledgerRun:  fs.Int("ledger-updates-per-run", 0, fmt.Sprintf("how many updates the fleet ledger takes before it continues as new (0: %d)", ledger.UpdatesPerRun)),
		workerKey: fs.String("worker-key", "", "the worker key that signs the permit each tool's activity checks (Ed25519, PEM, mode 0600): "+
			"every worker of a task queue must hold the same one (default: "+permit.WorkerKeyFile+" under --data, made if missing)"),
	}
}

// workerOptions are the worker's switches that dev, worker and demo set from flags.
type workerOptions struct {
	allowAuto    bool
	policy       *policy.Policy
	mcpFile      string                          // an --mcp file: its servers' tools join the worker's
	remote       []tool.Tool                     // a --tools file's tools, hosted by other workers
	deskDB       string                          // "" for the SQLite file under the data directory
	interceptors []interceptor.WorkerInterceptor // tracing, with --otlp-endpoint
	notify       *notify.Config                  // a --notify file
	ledgerRun    int                             // --ledger-updates-per-run
	workerKey    ed25519.PrivateKey              // --worker-key; nil: the data directory's
}

func (sv serving) workerOptions(tel *telemetry, stderr io.Writer) (workerOptions, error) {
	wo := workerOptions{allowAuto: *sv.allowAuto, mcpFile: *sv.mcpFile, deskDB: *sv.deskDB, interceptors: tel.interceptors, ledgerRun: *sv.ledgerRun}
	if *sv.toolsFile != "" {
		tools, err := remotetools.Load(*sv.toolsFile)
		if err != nil {
			return wo, fmt.Errorf("--tools: %w", err)
		}
		wo.remote = tools
	}
	if *sv.workerKey != "" {
		key, err := signed.ReadPrivateKey(*sv.workerKey)
		if err != nil {
			return wo, fmt.Errorf("--worker-key: %w", err)
		}
		wo.workerKey = key
	}
	if wo.ledgerRun < 0 {
		return wo, fmt.Errorf("--ledger-updates-per-run %d: want 0 (the default) or more", wo.ledgerRun)
	}
	if *sv.policyFile != "" {
		p, err := policy.Load(*sv.policyFile)
		if err != nil {
			return wo, err
		}
		warnPolicy(stderr, *sv.policyFile, p)
		wo.policy = p
	}
	if *sv.notifyFile != "" {
		n, err := notify.Load(*sv.notifyFile)
		if err != nil {
			return wo, err
		}
		wo.notify = n
	}
	return wo, nil
}

// warnPolicy prints what a policy loaded from file probably does not mean
// (policy.Policy.Warnings) on w, one line each: "policy: warning: …".
func warnPolicy(w io.Writer, file string, p *policy.Policy) {
	for _, msg := range p.Warnings() {
		fmt.Fprintf(w, "policy: warning: %s: %s\n", oneLine(file), msg)
	}
}

// telemetry is where a worker reports: a Prometheus endpoint (metrics) and
// an OTLP collector (traces, through interceptors), each if asked for.
type telemetry struct {
	metrics      *worker.Prometheus
	traces       *sdktrace.TracerProvider
	interceptors []interceptor.WorkerInterceptor
}

// parseServing parses args and starts what the flags ask for: the metrics
// endpoint, the OTLP exporter. keyFile is the flag of the worker's
// encryption key file: with one, spans go out redacted (tracing.Redact).
// Stop them with stop once the worker has stopped.
func (c *cli) parseServing(ctx context.Context, fs *flag.FlagSet, args []string, sv serving, keyFile *string) (*telemetry, error) {
	pos, err := parse(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) > 0 { // a bool flag's value given apart (--search-attributes false) would be one
		return nil, fmt.Errorf("%s takes no arguments (got %q): a flag's value goes after =, as in --search-attributes=false",
			strings.TrimPrefix(fs.Name(), "toolgate "), pos[0])
	}
	if *sv.otlpInsecure && *sv.otlpEndpoint == "" {
		return nil, errors.New("--otlp-insecure needs --otlp-endpoint")
	}
	m, err := c.startMetrics(*sv.metricsAddr)
	if err != nil {
		return nil, err
	}
	tel := &telemetry{metrics: m}
	if *sv.otlpEndpoint != "" {
		if err := c.startTracing(ctx, tel, *sv.otlpEndpoint, *sv.otlpInsecure, *keyFile != ""); err != nil {
			tel.stop()
			return nil, err
		}
	}
	return tel, nil
}

// startTracing exports traces to the collector at endpoint and says where;
// encrypted: the worker's payloads are, so its spans are redacted.
func (c *cli) startTracing(ctx context.Context, tel *telemetry, endpoint string, insecure, encrypted bool) error {
	var opts []tracing.Option
	if encrypted {
		opts = append(opts, tracing.Encrypted())
	}
	tp, err := tracing.OTLP(ctx, endpoint, insecure, opts...)
	if err != nil {
		return fmt.Errorf("--otlp-endpoint: %w", err)
	}
	ics, err := tracing.Interceptors(tp)
	if err != nil {
		_ = tp.Shutdown(ctx)
		return err
	}
	tel.traces, tel.interceptors = tp, ics
	hostport, plain, _ := tracing.Target(endpoint, insecure) // OTLP checked it
	how := "TLS"
	if plain {
		how = "plaintext"
	}
	if encrypted {
		how += "; payloads are encrypted, so spans carry no error text and only toolgate's attributes and the SDK's ids"
	}
	fmt.Fprintf(c.stdout, "traces to %s (OTLP/gRPC, %s)\n", hostport, how)
	return nil
}

// handler is the SDK metrics handler of the worker's client (nil: none).
func (tel *telemetry) handler() client.MetricsHandler { return tel.metrics.Handler() }

// stop sends the spans still queued and stops serving metrics.
func (tel *telemetry) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if tel.traces != nil {
		_ = tel.traces.Shutdown(ctx)
	}
	_ = tel.metrics.Stop(ctx)
}

// startMetrics serves Prometheus metrics at addr and says where; "" serves
// none (nil, whose Handler is nil and whose Stop does nothing).
func (c *cli) startMetrics(addr string) (*worker.Prometheus, error) {
	if addr == "" {
		return nil, nil
	}
	m, err := worker.Metrics(addr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c.stdout, "metrics at %s\n", m.URL())
	return m, nil
}
