// Package devserver runs a real Temporal server in-process, persisted in one
// SQLite file, so that `toolgate dev` and `toolgate demo` need nothing but Go,
// or in PostgreSQL (Options.Database), so that several workers on several
// machines can share it.
//
// Stopping it and starting it again on the same data directory keeps every
// workflow; the frontend may move to another port in between (clients
// reconnect by address).
//
// With Options.TLS the frontend serves TLS, and with a client CA mutual TLS
// (TLSOptions; package devtls makes certificates for it).
//
// With Options.Authorization every call of the frontend is given a role by
// its credential (a bearer token the server signs, a client certificate, or
// none), a person's calls are confined to what a person does with a run,
// and history events carry the caller's principal (AuthOptions).
package devserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log/tag"
	"go.temporal.io/server/common/primitives/timestamp"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

// DefaultNamespace is the namespace used when Options.Namespace is empty.
const DefaultNamespace = "default"

// NamespaceRetention is the workflow retention of a namespace that Start registers.
const NamespaceRetention = 7 * 24 * time.Hour

// startTimeout bounds Start when ctx has no deadline.
const startTimeout = 2 * time.Minute

// Server is a running in-process Temporal server.
type Server struct {
	address   string
	internal  string // the plaintext frontend of the server's own parts (address without TLS)
	tls       bool
	httpAddr  string
	namespace string
	authority string // the authority namespace (Options.AuthorityNamespace)
	dbPath    string
	pg        *pgStores
	pgLock    *pgLock
	srv       temporal.Server
	ui        *ui
	logger    slogLogger
	unlock    func()

	auth    *authority     // nil without Options.Authorization
	local   localClientTLS // this process's clients' TLS, under TLS and authorization
	renewal chan struct{}  // closed to stop renewing the worker token
	renewed chan struct{}  // closed when the renewal has stopped

	stopOnce sync.Once
	stopErr  error
}

// Why Start cannot begin, each saying what to do (a caller may name its own
// flags, errors.Is): another server listens on the frontend's address, or
// another server holds the data directory (or database).
var (
	ErrAddressInUse = errors.New("another server listens there: stop it, or choose another address")
	ErrDataInUse    = errors.New("stop that server, or give this one other data")
)

// open data directories of this process: the sqlite plugin shares one
// connection per file, so two servers on one file must not overlap.
var (
	openMu   sync.Mutex
	openDirs = map[string]bool{}
)

// boundStart bounds a start by startTimeout when ctx has no deadline.
func boundStart(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, startTimeout)
}

// Start starts the server and returns once its frontend serves the namespace
// and the search attributes are registered. ctx bounds the start (2 minutes
// when it has no deadline); it does not stop the server later: call Stop.
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	if opts.TLS != nil {
		if opts.TLS, err = opts.TLS.check(); err != nil {
			return nil, err
		}
	}
	if opts.TLS != nil && opts.Nexus {
		return nil, errors.New(ErrNexusUnderTLS)
	}
	if opts.Database != "" {
		return startPostgres(ctx, opts)
	}
	if opts.DataDir == "" {
		return nil, errors.New("devserver: Options.DataDir is required")
	}
	dir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("devserver: data dir: %w", err)
	}
	if strings.ContainsAny(dir, "?#") {
		// The sqlite plugin builds a "file:<path>?..." URI without escaping.
		return nil, fmt.Errorf("devserver: data dir %q must not contain '?' or '#'", dir)
	}
	ns := opts.namespace()
	ctx, cancel := boundStart(ctx)
	defer cancel()

	// 0700: the database holds every run's history (arguments, results,
	// approvals), for the user who runs the server only.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("devserver: create data dir: %w", err)
	}
	openMu.Lock()
	if openDirs[dir] {
		openMu.Unlock()
		return nil, fmt.Errorf("devserver: data dir %s is in use by another Server of this process: %w", dir, ErrDataInUse)
	}
	openDirs[dir] = true
	openMu.Unlock()

	s := &Server{namespace: ns, authority: opts.authorityNamespace(), dbPath: filepath.Join(dir, dbFileName), logger: newServerLogger(opts.Logger)}
	ok := false
	defer func() {
		if !ok {
			_ = s.Stop()
		}
	}()
	if s.unlock, err = lockDataDir(dir); err != nil {
		return nil, fmt.Errorf("devserver: %w", err)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("devserver: start: %v", r)
		}
	}()
	if err := s.start(ctx, opts); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

func (s *Server) start(ctx context.Context, opts Options) error {
	fe, err := resolveFrontend(opts.Address, s.pg != nil)
	if err != nil {
		return err
	}
	s.address = fe.address
	if s.pg != nil {
		return s.run(ctx, opts, fe, s.pg.history, s.pg.visibility)
	}

	sqlCfg := sqlConfig(s.dbPath)
	if created, err := ensureSchema(s.dbPath); err != nil {
		return fmt.Errorf("devserver: %w", err)
	} else if !created {
		if err := forgetMembers(s.dbPath); err != nil {
			return fmt.Errorf("devserver: %w", err)
		}
	}
	nsCfg, err := sqliteschema.NewNamespaceConfig(clusterName, s.namespace, false, opts.SearchAttributes)
	if err != nil {
		return fmt.Errorf("devserver: namespace %q: %w", s.namespace, err)
	}
	nsCfg.Detail.Config.Retention = timestamp.DurationPtr(NamespaceRetention)
	authCfg, err := sqliteschema.NewNamespaceConfig(clusterName, s.authority, false, nil)
	if err != nil {
		return fmt.Errorf("devserver: namespace %q: %w", s.authority, err)
	}
	authCfg.Detail.Config.Retention = timestamp.DurationPtr(NamespaceRetention)
	// A no-op when the namespace exists; search attributes missing from an
	// existing namespace are added below, through the operator service.
	if err := sqliteschema.CreateNamespaces(sqlCfg, nsCfg, authCfg); err != nil {
		return fmt.Errorf("devserver: register namespaces %q and %q: %w", s.namespace, s.authority, err)
	}
	return s.run(ctx, opts, fe, sqlCfg, sqlCfg)
}

// run starts the server on its stores and waits until it is ready.
func (s *Server) run(ctx context.Context, opts Options, fe endpoint, sqlCfg, visCfg *config.SQL) error {
	fo := frontendOptions{httpAPI: opts.HTTPAPI || opts.Nexus, tls: opts.TLS, internal: opts.TLS != nil}
	if opts.Authorization != nil {
		if err := s.openAuth(opts); err != nil {
			return err
		}
		// The server's own parts skip the roles through an internal
		// frontend; its Nexus requests go to that frontend's HTTP port.
		fo.internal, fo.internalHTTP = true, opts.Nexus
		if s.local.CAFile != "" {
			fo.clientCAs = []string{s.local.CAFile}
		}
	}
	cfg, err := serverConfigFor(fe, sqlCfg, visCfg, s.pg != nil, fo)
	if err != nil {
		return fmt.Errorf("devserver: %w", err)
	}
	services := temporal.DefaultServices
	s.internal = s.address
	s.tls = opts.TLS != nil
	if ife, ok := cfg.Services[internalFrontend]; ok {
		s.internal = net.JoinHostPort("127.0.0.1", strconv.Itoa(ife.RPC.GRPCPort))
		services = append(slices.Clip(services), internalFrontend)
	}
	if p := cfg.Services["frontend"].RPC.HTTPPort; p != 0 {
		s.httpAddr = net.JoinHostPort(fe.dialIP, strconv.Itoa(p))
	}
	logger := s.logger
	var (
		authorizer  authorization.Authorizer
		claimMapper authorization.ClaimMapper
		dc          dynamicconfig.StaticClient
	)
	if s.auth != nil {
		authorizer, claimMapper = roleAuthorizer{authority: s.authority}, &tokenClaimMapper{a: s.auth}
		dc = dynamicConfigWith(authDynamicConfig(), opts.DynamicConfig)
	} else {
		if authorizer, err = authorization.GetAuthorizerFromConfig(&cfg.Global.Authorization); err != nil {
			return fmt.Errorf("devserver: authorizer: %w", err)
		}
		if claimMapper, err = authorization.GetClaimMapperFromConfig(&cfg.Global.Authorization, logger); err != nil {
			return fmt.Errorf("devserver: claim mapper: %w", err)
		}
		dc = dynamicConfig(opts.DynamicConfig)
	}
	serverOpts := []temporal.ServerOption{
		temporal.WithConfig(cfg),
		temporal.ForServices(services),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dc),
	}
	if opts.Metrics != nil {
		serverOpts = append(serverOpts, temporal.WithCustomMetricsHandler(opts.Metrics))
	}
	if opts.Nexus && !opts.HTTPAPI {
		serverOpts = append(serverOpts, temporal.WithChainedFrontendGrpcInterceptors(NexusOnly))
	}
	if s.auth != nil && opts.Nexus {
		serverOpts = append(serverOpts, temporal.WithChainedFrontendGrpcInterceptors(internalNoHTTPAPI))
	}
	if len(opts.FrontendInterceptors) > 0 {
		serverOpts = append(serverOpts, temporal.WithChainedFrontendGrpcInterceptors(publicOnly(fe.port, opts.FrontendInterceptors)...))
	}
	srv, err := temporal.NewServer(serverOpts...)
	if err != nil {
		return fmt.Errorf("devserver: create server: %w", err)
	}
	if err := srv.Start(); err != nil {
		_ = srv.Stop()
		return fmt.Errorf("devserver: start server: %w", err)
	}
	s.srv = srv

	if err := s.awaitReady(ctx, opts.SearchAttributes); err != nil {
		return err
	}

	if opts.UIAddress != "" {
		// Without authorization the UI reaches the frontend the server's own
		// parts use: plaintext (on 127.0.0.1 under TLS). With it, the
		// public frontend with no credential (a person's role; under TLS
		// the local client certificate, a person's too): the UI's port must
		// not be a way around the roles.
		frontend, uiTLS := s.internal, (*localClientTLS)(nil)
		if s.auth != nil {
			frontend = s.address
			if s.tls {
				uiTLS = &s.local
			}
		}
		if s.ui, err = startUI(ctx, opts.UIAddress, frontend, s.namespace, opts.UICodecEndpoint, uiTLS); err != nil {
			return err
		}
	}
	if s.auth != nil {
		s.renewal, s.renewed = make(chan struct{}), make(chan struct{})
		go s.renewWorkerToken()
	}
	return nil
}

// openAuth opens the signing key of Options.Authorization (made if
// missing), writes a fresh worker token and, under TLS with client
// certificates, the local client certificate.
func (s *Server) openAuth(opts Options) error {
	dir := opts.Authorization.KeyDir
	if dir == "" {
		if opts.DataDir == "" {
			return errors.New("devserver: Authorization needs a KeyDir (or a DataDir, whose auth/ it uses)")
		}
		dir = filepath.Join(opts.DataDir, "auth")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("devserver: authorization key dir: %w", err)
	}
	if s.auth, err = openAuthority(dir, opts.Authorization); err != nil {
		return err
	}
	if err := s.auth.writeWorkerToken(); err != nil {
		return err
	}
	if opts.TLS != nil {
		if s.local, err = makeLocalClientTLS(dir, opts.TLS); err != nil {
			return err
		}
	}
	return nil
}

// renewWorkerToken replaces the worker token file every
// workerTokenRenewal until Stop.
func (s *Server) renewWorkerToken() {
	defer close(s.renewed)
	t := time.NewTicker(workerTokenRenewal)
	defer t.Stop()
	for {
		select {
		case <-s.renewal:
			return
		case <-t.C:
			if err := s.auth.writeWorkerToken(); err != nil {
				s.logger.Error("renewing the worker token", tag.Error(err))
			}
		}
	}
}

// awaitReady waits until the frontend serves the namespace, then registers
// the missing search attributes.
func (s *Server) awaitReady(ctx context.Context, want map[string]enumspb.IndexedValueType) error {
	c, err := s.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()

	var lastErr error
	for {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lastErr = s.ready(callCtx, c)
		cancel()
		if lastErr == nil {
			break
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("devserver: server at %s not ready: %w (last error: %v)", s.address, err, lastErr)
		}
	}
	if err := s.ensureSearchAttributes(ctx, c, want); err != nil {
		return err
	}
	if s.internal != s.address {
		return s.awaitListening(ctx)
	}
	return nil
}

// ready checks that the frontend serves the namespace and reaches history
// (shard owner found) and matching (membership ring formed).
func (s *Server) ready(ctx context.Context, c client.Client) error {
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return err
	}
	ws := c.WorkflowService()
	for _, ns := range []string{s.namespace, s.authority} {
		if _, err := ws.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns}); err != nil {
			var notFound *serviceerror.NamespaceNotFound
			if s.pg != nil && errors.As(err, &notFound) {
				return s.registerNamespace(ctx, ws, ns)
			}
			return err
		}
	}
	_, err := ws.DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: s.namespace,
		Execution: &commonpb.WorkflowExecution{WorkflowId: "toolgate-devserver-readiness-probe"},
	})
	var notFound *serviceerror.NotFound
	if err != nil && !errors.As(err, &notFound) {
		return fmt.Errorf("history: %w", err)
	}
	if _, err := ws.DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
		Namespace:     s.namespace,
		TaskQueue:     &taskqueuepb.TaskQueue{Name: "toolgate-devserver-readiness-probe", Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		TaskQueueType: enumspb.TASK_QUEUE_TYPE_WORKFLOW,
	}); err != nil {
		return fmt.Errorf("matching: %w", err)
	}
	return nil
}

func (s *Server) dial(ctx context.Context) (client.Client, error) {
	var lastErr error
	for {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := client.DialContext(callCtx, client.Options{
			HostPort:  s.internal,
			Namespace: s.namespace,
			Logger:    sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		})
		cancel()
		if err == nil {
			return c, nil
		}
		lastErr = err
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return nil, fmt.Errorf("devserver: frontend %s not reachable: %w (last error: %v)", s.internal, err, lastErr)
		}
	}
}

func (s *Server) ensureSearchAttributes(ctx context.Context, c client.Client, want map[string]enumspb.IndexedValueType) error {
	if len(want) == 0 {
		return nil
	}
	ops := c.OperatorService()
	list, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.namespace})
	if err != nil {
		return fmt.Errorf("devserver: list search attributes: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	var conflicts []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		typ := want[name]
		have, ok := list.GetCustomAttributes()[name]
		if !ok {
			have, ok = list.GetSystemAttributes()[name]
		}
		switch {
		case !ok:
			missing[name] = typ
		case have != typ:
			conflicts = append(conflicts, fmt.Sprintf("%s is %s, want %s", name, have, typ))
		}
	}
	if len(conflicts) > 0 {
		return fmt.Errorf("devserver: search attributes registered with another type in namespace %q: %s",
			s.namespace, strings.Join(conflicts, "; "))
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = ops.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        s.namespace,
		SearchAttributes: missing,
	})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("devserver: add search attributes %v: %w", slices.Sorted(maps.Keys(missing)), err)
	}
	return nil
}

// Address is the frontend's host:port, for client.Options.HostPort. With
// Options.TLS it serves TLS only (see TLS).
func (s *Server) Address() string { return s.address }

// TLS reports whether the frontend at Address serves TLS (Options.TLS):
// clients need ConnectionOptions.TLS, trusting the CA of TLS.CertFile, and
// with TLS.ClientCAFile a client certificate signed by that CA.
func (s *Server) TLS() bool { return s.tls }

// InternalAddress is the host:port of a plaintext frontend for clients in
// this process or on this machine that the server trusts as its own parts:
// with Options.TLS or Options.Authorization the internal frontend on
// 127.0.0.1, which needs no certificate (see TLSOptions) and gives every
// caller the server's own role (see AuthOptions); without them, Address.
// Under authorization a worker uses Address with a worker token instead
// (LocalWorker), so that its events carry a worker's principal.
func (s *Server) InternalAddress() string { return s.internal }

// Authorization reports whether the server runs with Options.Authorization.
func (s *Server) Authorization() bool { return s.auth != nil }

// WorkerTokenFile is the file Start wrote the worker token to (mode 0600;
// renewed while the server runs), or "" without Options.Authorization.
func (s *Server) WorkerTokenFile() string {
	if s.auth == nil {
		return ""
	}
	return filepath.Join(s.auth.dir, WorkerTokenFile)
}

// MintToken makes a bearer token of role (RoleWorker or RolePerson) for
// subject, valid for ttl, that this server accepts (see AuthOptions). It
// fails without Options.Authorization.
func (s *Server) MintToken(role, subject string, ttl time.Duration) (string, error) {
	if s.auth == nil {
		return "", errors.New("devserver: MintToken: the server runs without Options.Authorization")
	}
	return s.auth.mint(role, subject, ttl)
}

// LocalWorker is how a worker in this process reaches the server with the
// worker role under Options.Authorization.
type LocalWorker struct {
	// Address is the public frontend (Server.Address).
	Address string
	// TokenFile is the worker token's file (Server.WorkerTokenFile).
	TokenFile string
	// TLS: Address serves TLS; ServerCAFile is then the server's
	// certificate file, to check it against, and under client certificates
	// CertFile and KeyFile are a client certificate the server takes (a
	// person's, by itself: the token gives the worker role).
	TLS                             bool
	ServerCAFile, CertFile, KeyFile string
}

// LocalWorker says how a worker of this process connects with the worker
// role; ok is false without Options.Authorization (use InternalAddress).
func (s *Server) LocalWorker() (_ LocalWorker, ok bool) {
	if s.auth == nil {
		return LocalWorker{}, false
	}
	w := LocalWorker{Address: s.address, TokenFile: s.WorkerTokenFile(), TLS: s.tls}
	if s.tls {
		w.ServerCAFile, w.CertFile, w.KeyFile = s.local.ServerCAFile, s.local.CertFile, s.local.KeyFile
	}
	return w, true
}

// Namespace is the namespace Start registered.
func (s *Server) Namespace() string { return s.namespace }

// AuthorityNamespace is the authority namespace Start registered beside
// Namespace: only workers write it (package authority).
func (s *Server) AuthorityNamespace() string { return s.authority }

// HTTPAddress is the frontend HTTP port's host:port, or "" when it is off
// (the default; see Options.HTTPAPI and Options.Nexus: with Nexus alone it
// serves Nexus requests only). With Options.TLS it serves https, with the
// frontend's TLS settings.
func (s *Server) HTTPAddress() string { return s.httpAddr }

// UIAddress is the Web UI's host:port ("http://" + UIAddress()), or "" when
// no UI is served.
func (s *Server) UIAddress() string {
	if s.ui == nil {
		return ""
	}
	return s.ui.address
}

// Stop stops the UI and the server gracefully and closes the SQLite file (or
// releases the PostgreSQL database),
// after which Start may open the same DataDir again. It is idempotent: later
// calls return the first call's result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		var errs []error
		// While the services shut down, and after (the server leaves some
		// goroutines behind), the server logs errors about peers that are
		// gone: noise, not news.
		s.logger.mute()
		if s.renewal != nil {
			close(s.renewal)
			<-s.renewed
		}
		if s.ui != nil {
			s.ui.stop()
		}
		if s.srv != nil {
			if err := stopTemporal(s.srv); err != nil {
				errs = append(errs, fmt.Errorf("devserver: stop server: %w", err))
			}
		}
		if s.pgLock != nil {
			if err := s.pgLock.release(); err != nil {
				errs = append(errs, fmt.Errorf("devserver: release %s: %w", s.pg.redacted(), err))
			}
		}
		if s.dbPath != "" {
			if _, err := releaseSQLite(s.dbPath); err != nil {
				errs = append(errs, fmt.Errorf("devserver: close %s: %w", s.dbPath, err))
			}
			if s.unlock != nil {
				s.unlock()
			}
			openMu.Lock()
			delete(openDirs, filepath.Dir(s.dbPath))
			openMu.Unlock()
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

func stopTemporal(srv temporal.Server) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return srv.Stop()
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
