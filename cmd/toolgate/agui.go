package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/toolgate/toolgate/agui"
	tgclient "github.com/toolgate/toolgate/client"
	aguipage "github.com/toolgate/toolgate/examples/agui"
	"github.com/toolgate/toolgate/mcpserve"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// aguiFlags are the AG-UI endpoint's own flags, named alike in
// `toolgate agui` and `toolgate dev`.
type aguiFlags struct {
	planner *string
	tokens  *string
	origins listFlag
}

func addAGUIFlags(fs *flag.FlagSet) *aguiFlags {
	f := &aguiFlags{planner: fs.String("agui-planner", plan.KindSupport,
		"the planner of every run the AG-UI endpoint starts: support (the demo desk's rule-based one) or openai (the worker's OPENAI_* settings); the client never chooses it"),
		tokens: fs.String("agui-tokens", "", "the AG-UI endpoint's callers: a tokens file (toolgate mcp token new NAME [--key NAME.key] --tokens FILE); every request then needs Authorization: Bearer TOKEN, "+
			"and under a worker policy a thread's run starts signed by its caller's key, its verified requester")}
	fs.Var(&f.origins, "agui-origin", "a browser origin, scheme://host[:port], whose pages may call the AG-UI endpoint (CORS; repeat, or comma-separated; default none: only pages of the endpoint's own origin)")
	return f
}

// plannerConfig is the planner --agui-planner names.
func (f *aguiFlags) plannerConfig() (plan.Config, error) {
	switch *f.planner {
	case plan.KindSupport, plan.KindOpenAI:
		return plan.Config{Kind: *f.planner}, nil
	}
	return plan.Config{}, fmt.Errorf("--agui-planner %q: want %s or %s", *f.planner, plan.KindSupport, plan.KindOpenAI)
}

// aguiListen are the listener's flags of `toolgate agui` (as `mcp serve`'s).
type aguiListen struct {
	tlsCert, tlsKey *string
	insecure        *bool
	hosts           listFlag
}

func addAGUIListenFlags(fs *flag.FlagSet) *aguiListen {
	l := &aguiListen{
		tlsCert:  fs.String("listen-tls-cert", "", "serve AG-UI over HTTPS with this certificate (PEM); with --listen-tls-key"),
		tlsKey:   fs.String("listen-tls-key", "", "the private key (PEM) of --listen-tls-cert"),
		insecure: fs.Bool("insecure", false, "serve plain HTTP on a non-loopback --listen (anyone on the network who reaches it can then drive runs and decide unsigned calls)"),
	}
	fs.Var(&l.hosts, "host", "a host name (or HOST:PORT) clients reach the endpoint by, besides the listen address and localhost (repeat, or comma-separated)")
	return l
}

// checkAGUIListen refuses a non-loopback addr without TLS or --insecure,
// and half a TLS configuration; it says whether to serve TLS.
func checkAGUIListen(addr string, l *aguiListen) (bool, error) {
	return checkListen(addr, listenCheck{what: "AG-UI", certFlag: "--listen-tls-cert", cert: *l.tlsCert, key: *l.tlsKey,
		insecure: *l.insecure, plain: "serve plain HTTP to the network"})
}

// aguiServe is what an AG-UI endpoint is served with.
type aguiServe struct {
	tc                           client.Client
	dc                           converter.DataConverter // the client's, which encodes the door memo
	taskQueue                    string
	planner                      plan.Config
	origins, hosts               []string
	approvalTimeout, idleTimeout time.Duration
	page                         bool // also serve the example chat page at /
	tlsCert, tlsKey              string
	// callers authenticate requests (nil: none); policy: the worker has an
	// approval policy, so a thread's run starts signed by its caller.
	callers func(string) (agui.Caller, bool)
	policy  bool
}

// serveAGUI serves the AG-UI endpoint at addr (path /agui; with o.page the
// chat page at /). The caller checked addr, and says where.
func (c *cli) serveAGUI(addr string, o aguiServe) (*served, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("AG-UI: %w", err)
	}
	h, err := agui.New(agui.Options{
		Backend:         agui.NewBackend(tgclient.New(o.tc, tgclient.WithTaskQueue(o.taskQueue)), agui.WithDataConverter(o.dc)),
		Planner:         o.planner,
		Hosts:           append(mcpserve.LoopbackHosts(ln.Addr().String()), o.hosts...),
		Origins:         o.origins,
		ApprovalTimeout: o.approvalTimeout,
		IdleTimeout:     o.idleTimeout,
		Logger:          slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Callers:         o.callers,
		Policy:          o.policy,
	})
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	var handler http.Handler = h
	if o.page {
		mux := http.NewServeMux()
		mux.Handle(agui.Path, h)
		mux.Handle("/", h.Guard(aguipage.Handler()))
		handler = mux
	}
	// No ReadTimeout nor WriteTimeout: a stream stays open for a turn
	// (agui.Options.MaxStream bounds it; the handler bounds the body's read
	// and each event's write with deadlines of their own).
	s := &served{srv: &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}}
	scheme := "http"
	if o.tlsCert != "" {
		scheme = "https"
		go func() { _ = s.srv.ServeTLS(ln, o.tlsCert, o.tlsKey) }()
	} else {
		go func() { _ = s.srv.Serve(ln) }()
		if !isLoopback(hostOfAddr(addr)) {
			fmt.Fprintf(c.stderr, "WARNING: AG-UI at %s is plain HTTP on a non-loopback address: anyone who reaches it can drive runs and decide the calls of runs without a policy\n", addr)
		}
	}
	s.URL = scheme + "://" + ln.Addr().String() + agui.Path
	warnAGUIPolicy(c.stderr, o.policy, o.callers)
	return s, nil
}

// aguiCmd is `toolgate agui`: the AG-UI endpoint for runs on any Temporal
// server (their workers run elsewhere).
func (c *cli) aguiCmd(ctx context.Context, args []string) error {
	fs := c.flags("agui")
	cn := c.connFlags(fs)
	tq := taskQueueFlag(fs)
	listen := fs.String("listen", "127.0.0.1:8090", "serve AG-UI at HOST:PORT, path /agui (non-loopback needs --listen-tls-cert/--listen-tls-key or --insecure)")
	af := addAGUIFlags(fs)
	lf := addAGUIListenFlags(fs)
	approval := fs.Duration("approval-timeout", 0, "the approval timeout of the runs it starts (0: the run's default, 24h)")
	idle := fs.Duration("idle-timeout", 0, "how long a thread's run waits for the next message before it ends (0: the run's default, 24h)")
	policyFile := fs.String("policy", "", "the approval policy of the runs' worker (its --policy file): a thread's run then starts signed by its caller (--agui-tokens, with keys), its verified requester")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("agui takes no arguments (got %q): see toolgate --help", pos[0])
	}
	planner, err := af.plannerConfig()
	if err != nil {
		return err
	}
	if *approval < 0 || *idle < 0 {
		return errors.New("--approval-timeout and --idle-timeout may not be negative")
	}
	if _, err := checkAGUIListen(*listen, lf); err != nil {
		return err
	}
	var pol *policy.Policy
	if *policyFile != "" {
		if pol, err = policy.Load(*policyFile); err != nil {
			return err
		}
	}
	callers, err := aguiCallers(*af.tokens, pol)
	if err != nil {
		return err
	}
	tc, conn, err := c.dial(ctx, cn)
	if err != nil {
		return err
	}
	defer tc.Close()
	s, err := c.serveAGUI(*listen, aguiServe{tc: tc, dc: conn.Options.DataConverter, taskQueue: *tq, planner: planner,
		origins: af.origins, hosts: lf.hosts, approvalTimeout: *approval, idleTimeout: *idle, tlsCert: *lf.tlsCert, tlsKey: *lf.tlsKey,
		callers: callers, policy: pol != nil})
	if err != nil {
		return err
	}
	defer s.stop()
	fmt.Fprintf(c.stderr, "AG-UI at %s (Temporal %s, task queue %s, planner %s)\n", s.URL, conn.Describe(), *tq, planner.Kind)
	<-ctx.Done()
	return nil
}

// devAGUI serves dev's AG-UI endpoint and the example chat page at addr
// (loopback only, like --mcp-address), over the stack's client.
func (c *cli) devAGUI(addr string, s *stack, f *aguiFlags) (*served, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--agui-address %q: want HOST:PORT: %w", addr, err)
	}
	if !isLoopback(host) {
		return nil, fmt.Errorf("--agui-address %s is not a loopback address: dev serves AG-UI on loopback only; for the network use `toolgate agui` with --listen-tls-cert/--listen-tls-key", addr)
	}
	planner, err := f.plannerConfig()
	if err != nil {
		return nil, err
	}
	var callers func(string) (agui.Caller, bool)
	if f.tokens != nil {
		if callers, err = aguiCallers(*f.tokens, s.pol); err != nil {
			return nil, err
		}
	}
	a, err := c.serveAGUI(addr, aguiServe{tc: s.client, dc: s.conn.Options.DataConverter, taskQueue: workflows.TaskQueue,
		planner: planner, origins: f.origins, page: true, callers: callers, policy: s.policy})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c.stdout, "AG-UI at %s (chat: %s/)\n", a.URL, strings.TrimSuffix(a.URL, agui.Path))
	return a, nil
}

// checkDevAGUI refuses dev's --agui-* flags without --agui-address.
func checkDevAGUI(addr string, f *aguiFlags) error {
	if addr == "" && (len(f.origins) > 0 || *f.planner != plan.KindSupport || *f.tokens != "") {
		return errors.New("--agui-origin, --agui-planner and --agui-tokens go with --agui-address HOST:PORT")
	}
	return nil
}
