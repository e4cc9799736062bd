package devserver

import (
	"fmt"
	"maps"
	"net"
	"strconv"
	"time"

	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
)

const clusterName = "active"

// QueuePollRPS is how many times a second each history shard may read a
// task queue of its own (transfer, timer, visibility) on toolgate's server.
// The stock server allows 20 (see StockQueuePolling).
//
// A history shard hands a new workflow task to matching only after its
// transfer queue reader has read the task back from the database, and the
// reader waits on a per-shard rate limiter before every read. A sequential
// run needs one read per call (the workflow task that follows each
// activity), so at the stock 20 reads a second every call after the
// limiter's first burst waits for its 50 ms slot: one run does 20 calls a
// second however fast the rest is. The limit protects a database shared by
// hundreds of shards; toolgate's server has one shard on SQLite (four on
// PostgreSQL) and one user, and each read takes every task that is ready,
// so a higher limit costs a read per call and nothing else. BENCHMARKS.md
// ("Where a call's time went") has the measurements.
const QueuePollRPS = 1000

// queuePollSettings are the dynamic config keys QueuePollRPS sets.
var queuePollSettings = []dynamicconfig.Key{
	dynamicconfig.TransferProcessorMaxPollRPS.Key(),
	dynamicconfig.TimerProcessorMaxPollRPS.Key(),
	dynamicconfig.VisibilityProcessorMaxPollRPS.Key(),
}

// StockQueuePollRPS is the stock server's queue poll rate, reads a second per
// shard (the default of each setting QueuePollRPS sets).
const StockQueuePollRPS = 20

// StockQueuePolling is the stock server's queue poll rate as
// Options.DynamicConfig: the baseline that benchmarks start a server with to
// measure what QueuePollRPS changes.
func StockQueuePolling() map[string]any {
	m := map[string]any{}
	for _, k := range queuePollSettings {
		m[k.String()] = StockQueuePollRPS
	}
	return m
}

// dynamicConfig is the server's dynamic config: the defaults, plus what a dev
// box and toolgate's tests need, then the caller's overrides (keys as in a
// Temporal dynamic config file, case-insensitive).
func dynamicConfig(overrides map[string]any) dynamicconfig.StaticClient {
	return dynamicConfigWith(nil, overrides)
}

// dynamicConfigWith is dynamicConfig with settings before the overrides
// (authDynamicConfig under authorization).
func dynamicConfigWith(settings map[dynamicconfig.Key]any, overrides map[string]any) dynamicconfig.StaticClient {
	dc := dynamicconfig.StaticClient{
		// Workflow update (toolgate's approve/reject updates). Both are on by
		// default in v1.32; set so that a default flip cannot break toolgate.
		dynamicconfig.FrontendEnableUpdateWorkflowExecution.Key():              true,
		dynamicconfig.FrontendEnableUpdateWorkflowExecutionAsyncAccepted.Key(): true,
		// Read search attribute definitions (and namespace aliases of custom
		// search attributes) through to the database instead of a cache that
		// refreshes every few seconds: a search attribute added at start is
		// usable at once, not after the next refresh. What the server's own
		// test clusters and temporaltest do; fine for one local user.
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
		// These system workers are started by the worker service and never
		// stopped by Server.Stop ("TODO: Nothing is gracefully stopping these
		// workers" in service/worker/scanner): after an in-process Stop their
		// pollers would retry the old frontend address forever, and attach to
		// whatever listens there next. A one-user dev database does not need
		// them: the task queue scanner deletes stale task queue rows, the
		// history scanner garbage-collects orphaned history branches, and
		// without the parent-close-policy worker history applies parent close
		// policies to child workflows itself.
		dynamicconfig.TaskQueueScannerEnabled.Key():       false,
		dynamicconfig.HistoryScannerEnabled.Key():         false,
		dynamicconfig.EnableParentClosePolicyWorker.Key(): false,
	}
	for _, k := range queuePollSettings {
		dc[k] = QueuePollRPS
	}
	maps.Copy(dc, settings)
	for k, v := range overrides {
		dc[dynamicconfig.MakeKey(k)] = v
	}
	return dc
}

// endpoint is where the frontend listens and how clients reach it.
type endpoint struct {
	bindIP  string // IP literal the listener binds to
	dialIP  string // IP clients use (loopback when bindIP is unspecified)
	port    int
	address string // dialIP:port
}

// parseListenAddress parses "host:port" for a listener. An empty host or
// "localhost" means 127.0.0.1 (a dev server is not exposed by accident; pass
// 0.0.0.0 to listen on all interfaces); port 0 means "pick a free one".
func parseListenAddress(addr string) (host string, port int, err error) {
	if addr == "" {
		return "127.0.0.1", 0, nil
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	switch h {
	case "", "localhost":
		h = "127.0.0.1"
	}
	if net.ParseIP(h) == nil {
		return "", 0, fmt.Errorf("host %q is not an IP address (use an IP, localhost or an empty host)", h)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return h, port, nil
}

func dialIP(bindIP string) string {
	if ip := net.ParseIP(bindIP); ip != nil && ip.IsUnspecified() {
		if ip.To4() == nil {
			return "::1"
		}
		return "127.0.0.1"
	}
	return bindIP
}

// resolveFrontend picks the frontend endpoint from Options.Address (a port
// below 32768 when small: see portPicker).
func resolveFrontend(addr string, small bool) (endpoint, error) {
	host, port, err := parseListenAddress(addr)
	if err != nil {
		return endpoint{}, fmt.Errorf("devserver: Address %q: %w", addr, err)
	}
	if port == 0 {
		picker := &portPicker{host: host, used: map[int]bool{}, small: small}
		if port, err = picker.next(); err != nil {
			return endpoint{}, fmt.Errorf("devserver: %w", err)
		}
	} else if err := checkPortFree(host, port); err != nil {
		return endpoint{}, fmt.Errorf("devserver: frontend address %s is not free: %w (%w)", addr, err, ErrAddressInUse)
	}
	d := dialIP(host)
	return endpoint{bindIP: host, dialIP: d, port: port, address: net.JoinHostPort(d, strconv.Itoa(port))}, nil
}

// serverConfig is the static config of a single-process server: all four
// services, one history shard (postgresShards on PostgreSQL, pg), every port but the
// frontend's picked free on 127.0.0.1. sql is the default (history) store and
// vis the visibility store (the same for SQLite).
//
// The frontend's HTTP/JSON API is off unless httpAPI: it has no
// authentication and accepts cross-origin text/plain POSTs, so any web page
// open in the operator's browser could start or signal workflows through it.
// The server starts it only for a non-zero RPC.HTTPPort (httpEnabled and
// HTTPAPIServerProvider in go.temporal.io/server/service/frontend/fx.go).
//
// With tlsOpts (checked), the frontend serves TLS and an internal frontend
// serves the server's own clients (applyTLS, TLSOptions).
func serverConfig(fe endpoint, sql, vis *config.SQL, pg, httpAPI bool, tlsOpts *TLSOptions) (*config.Config, error) {
	return serverConfigFor(fe, sql, vis, pg, frontendOptions{httpAPI: httpAPI, tls: tlsOpts, internal: tlsOpts != nil})
}

// frontendOptions say how the frontends of serverConfigFor serve.
type frontendOptions struct {
	httpAPI bool        // the public frontend serves an HTTP port
	tls     *TLSOptions // the public frontend serves TLS (checked)
	// clientCAs are more CAs of client certificates, with tls.ClientCAFile.
	clientCAs []string
	// internal: an internal frontend serves the server's own parts (under
	// TLS or authorization); internalHTTP: with an HTTP port (Nexus).
	internal, internalHTTP bool
}

// serverConfigFor is serverConfig with the frontends of o.
func serverConfigFor(fe endpoint, sql, vis *config.SQL, pg bool, o frontendOptions) (*config.Config, error) {
	ports := newPortPicker("127.0.0.1")
	ports.used[fe.port] = true
	ports.small = pg
	shards := int32(1)
	if pg {
		shards = postgresShards
	}
	next := func() (int, error) { return ports.next() }

	var cfg config.Config
	cfg.Global.Membership = config.Membership{
		MaxJoinDuration:  30 * time.Second,
		BroadcastAddress: "127.0.0.1",
	}

	store, visStore := "sqlite-default", "sqlite-default"
	if vis != sql {
		store, visStore = "default", "visibility"
	}
	cfg.Persistence = config.Persistence{
		DefaultStore:     store,
		VisibilityStore:  visStore,
		NumHistoryShards: shards,
		DataStores:       map[string]config.DataStore{store: {SQL: sql}, visStore: {SQL: vis}},
	}

	cfg.ClusterMetadata = &cluster.Config{
		EnableGlobalNamespace:    false,
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             fe.address,
				// ClusterID left empty: generated on first start, then read
				// from the database.
			},
		},
	}
	cfg.DCRedirectionPolicy = config.DCRedirectionPolicy{Policy: "noop"}

	frontend := config.Service{RPC: config.RPC{GRPCPort: fe.port, BindOnIP: fe.bindIP}}
	var err error
	if frontend.RPC.MembershipPort, err = next(); err != nil {
		return nil, err
	}
	if o.httpAPI {
		if frontend.RPC.HTTPPort, err = freePortOn(ports, fe.bindIP); err != nil {
			return nil, err
		}
	}
	cfg.Services = map[string]config.Service{"frontend": frontend}
	for _, name := range []string{"history", "matching", "worker"} {
		svc := config.Service{RPC: config.RPC{BindOnLocalHost: true}}
		if svc.RPC.GRPCPort, err = next(); err != nil {
			return nil, err
		}
		if svc.RPC.MembershipPort, err = next(); err != nil {
			return nil, err
		}
		cfg.Services[name] = svc
	}

	cfg.Archival.History.State = "disabled"
	cfg.Archival.Visibility.State = "disabled"
	cfg.NamespaceDefaults.Archival.History.State = "disabled"
	cfg.NamespaceDefaults.Archival.Visibility.State = "disabled"
	// The server's internal SDK clients (system workflows) dial this.
	cfg.PublicClient.HostPort = fe.address
	if o.tls != nil {
		applyTLS(&cfg, o.tls, o.clientCAs)
	}
	if o.internal || o.tls != nil {
		if _, err := addInternalFrontend(&cfg, next, o.internalHTTP); err != nil {
			return nil, err
		}
	}
	return &cfg, nil
}

// freePortOn picks a port for the frontend's HTTP API, which listens on the
// frontend's IP: free there and distinct from the other picks.
func freePortOn(p *portPicker, ip string) (int, error) {
	if ip == p.host {
		return p.next()
	}
	for range 20 {
		port, err := freePort(ip)
		if err != nil {
			return 0, err
		}
		if !p.used[port] {
			p.used[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free TCP port on %s", ip)
}
