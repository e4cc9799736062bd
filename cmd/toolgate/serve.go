package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"golang.org/x/term"

	"github.com/toolgate/toolgate/activities/desk"
	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/demo"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/internal/private"
	"github.com/toolgate/toolgate/nexusserve"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// searchAttributes are the ones toolgate keeps current on every run.
var searchAttributes = map[string]enumspb.IndexedValueType{
	workflows.SearchAttrStatus:       enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	workflows.SearchAttrPendingTools: enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
	workflows.SearchAttrForkedFrom:   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}

func dataFlag(fs *flag.FlagSet) *string {
	return fs.String("data", ".toolgate", "data directory: the embedded server's SQLite files, the desk's (desk.db) and the demo's own desk (demo-desk.db, reset at each demo)")
}

// stack is an embedded server with a toolgate worker on it.
type stack struct {
	server *devserver.Server
	client client.Client
	conn   *connect.Conn // how client reaches server
	worker sdkworker.Worker
	desk   *desk.Desk
	mcp    *mcpTools // the --mcp file's servers, if any
	// tools and policy: what the worker registered, and whether it has an
	// approval policy (for serving MCP on top).
	tools  []tool.Spec
	policy bool
	// notify and pol: the worker's --notify file and policy, which the
	// inbox's listener answers links and Slack clicks with.
	notify *notify.Config
	pol    *policy.Policy
	viaKey ed25519.PrivateKey // dev's --via-key
}

// replies is what the stack's inbox listener answers notifications with
// (nil: the worker notifies nobody).
func (s *stack) replies() *replies {
	if s.notify == nil {
		return nil
	}
	return &replies{notify: s.notify, policy: s.pol, viaKey: s.viaKey}
}

func (s *stack) stop() {
	if s.worker != nil {
		s.worker.Stop()
	}
	s.mcp.close()
	if s.client != nil {
		s.client.Close()
	}
	if s.desk != nil {
		_ = s.desk.Close()
	}
	if s.server != nil {
		_ = s.server.Stop()
	}
}

// up starts the embedded server (srv: where and what it serves; its logger
// and search attributes are set here) and, unless wo is nil, a worker on it
// (metrics: the worker's metrics handler, nil for none). own is how this
// process's client reaches the server: its address and namespace are set
// here, and it is isolated from profiles and TEMPORAL_* variables (meant for
// other clusters); it may name an encryption key file.
func (c *cli) up(ctx context.Context, srv devserver.Options, own connect.Settings, wo *workerOptions, metrics client.MetricsHandler) (_ *stack, err error) {
	s := &stack{}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	dataDir := srv.DataDir
	if srv.Database == "" || wo != nil {
		if err := private.Dir(dataDir); err != nil {
			return nil, err
		}
	}
	var serverLog *slog.Logger // the embedded server is chatty (and noisy when it stops): off unless asked for
	if lvl := os.Getenv("TOOLGATE_SERVER_LOG"); lvl != "" {
		var level slog.Level
		if err := level.UnmarshalText([]byte(lvl)); err != nil {
			return nil, fmt.Errorf("TOOLGATE_SERVER_LOG=%q: want debug, info, warn or error", lvl)
		}
		serverLog = slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: level}))
	}
	srv.SearchAttributes, srv.Logger = searchAttributes, serverLog
	s.server, err = devserver.Start(ctx, srv)
	switch {
	case errors.Is(err, devserver.ErrAddressInUse):
		return nil, fmt.Errorf("starting the embedded Temporal server: %w; is a toolgate dev already running there? "+
			"(another address: --address HOST:PORT, and TEMPORAL_ADDRESS=HOST:PORT for the other commands)", err)
	case errors.Is(err, devserver.ErrDataInUse):
		return nil, fmt.Errorf("starting the embedded Temporal server: %w (a toolgate dev or demo of this directory holds it: "+
			"Ctrl-C it in its shell, or pass --data DIR)", err)
	case err != nil:
		return nil, fmt.Errorf("starting the embedded Temporal server: %w", err)
	}
	// InternalAddress: the server's plaintext frontend on 127.0.0.1 (its
	// Address under --tls-* serves TLS, and may want a client certificate
	// that this process has not got).
	own.Address, own.Namespace, own.Isolated, own.Worker = s.server.InternalAddress(), s.server.Namespace(), true, wo != nil
	if lw, ok := s.server.LocalWorker(); ok {
		// Under the server's authorization (dev) this process is a worker
		// like any other: the public frontend, the worker token, so that
		// the events its worker causes carry a worker's principal.
		own.Address, own.TokenFile = lw.Address, lw.TokenFile
		if lw.TLS {
			own.TLS, own.TLSCA, own.TLSCert, own.TLSKey = &lw.TLS, lw.ServerCAFile, lw.CertFile, lw.KeyFile
		}
	}
	s.client, s.conn, err = c.dialWith(ctx, &own, metrics)
	if err != nil {
		return nil, err
	}
	if wo == nil {
		return s, nil // a server only: the inbox, if asked for, still uses s.client
	}
	opts, d, err := demo.OptionsWithDesk(dataDir, wo.deskDB)
	if err != nil {
		return nil, err
	}
	s.desk = d
	if s.mcp, err = c.openMCP(ctx, wo.mcpFile, dataDir); err != nil {
		return nil, err
	}
	if s.mcp != nil {
		opts.Tools = append(opts.Tools, s.mcp.source.Tools()...)
	}
	opts.Tools = append(opts.Tools, wo.remote...)
	opts.AllowAutoApprove, opts.Policy, opts.Interceptors = wo.allowAuto, wo.policy, wo.interceptors
	if wo.workerKey != nil {
		opts.WorkerKey = wo.workerKey
	}
	opts.LedgerUpdatesPerRun = wo.ledgerRun
	opts.SearchAttributes, opts.DataConverter, opts.FailureConverter = true, s.conn.Options.DataConverter, s.conn.Options.FailureConverter
	opts.Notify, s.notify, s.pol = notifierOf(wo.notify), wo.notify, wo.policy
	if opts.Authority, err = s.conn.DialAuthority(ctx, s.client, func(o *client.Options) {
		o.Logger, o.MetricsHandler = c.quietLogger(), metrics
	}); err != nil {
		return nil, err
	}
	s.worker, err = worker.Start(s.client, workflows.TaskQueue, opts)
	if err != nil {
		return nil, err
	}
	s.tools, s.policy = opts.Config().Tools, opts.Policy != nil
	return s, nil
}

// worker is `toolgate worker`: a worker against any Temporal server.
func (c *cli) worker(ctx context.Context, args []string) error {
	fs := c.flags("worker")
	wf := c.addWorkerFlags(fs)
	nexus := fs.Bool("nexus", false, "also host toolgate's Nexus service (service toolgate: call, run) in this process, on --nexus-task-queue, "+
		"for the runs of --task-queue; it creates no endpoint: an operator routes one to it with "+
		"`toolgate nexus endpoint create NAME --target-namespace NS --task-queue Q`")
	nexusQueue := fs.String("nexus-task-queue", nexusserve.TaskQueue, "with --nexus: the task queue of the Nexus service's worker, the endpoint's target")
	wf.check = func(given map[string]bool) error {
		return checkWorkerNexus(*nexus, given["nexus-task-queue"], *nexusQueue, *wf.tq)
	}
	rw, err := c.startWorker(ctx, fs, args, wf)
	if err != nil {
		return err
	}
	defer rw.stop()
	if *nexus {
		nw, err := startNexus(rw.client, rw.conn, *nexusQueue, *wf.tq, rw.opts.Policy != nil)
		if err != nil {
			return err
		}
		defer nw.Stop()
		fmt.Fprintf(c.stdout, "Nexus service %s (%s, %s) on task queue %s, for the runs of task queue %s\n",
			nexusserve.ServiceName, nexusserve.OperationCall, nexusserve.OperationRun, *nexusQueue, *wf.tq)
		c.warnNexusEncrypted(wf.cn.EncryptionKeyFile)
	}
	fmt.Fprintf(c.stdout, "worker ready on %s, task queue %s\n", rw.conn.Describe(), *wf.tq)
	<-ctx.Done()
	return nil
}

// workerFlags are the flags of a process that runs a worker against any
// Temporal server (worker, mcp serve).
type workerFlags struct {
	cn          *connect.Settings
	tq          *string
	data        *string
	searchAttrs *searchAttrsMode
	sv          serving
	// check, if set, checks the command's own flags once parsed, before
	// anything starts (given: the flags set on the command line).
	check func(given map[string]bool) error
}

func (c *cli) addWorkerFlags(fs *flag.FlagSet) *workerFlags {
	return &workerFlags{
		cn:          c.connFlags(fs),
		tq:          taskQueueFlag(fs),
		data:        dataFlag(fs),
		searchAttrs: searchAttrsFlag(fs),
		sv:          servingFlags(fs),
	}
}

// runningWorker is a started worker, its client and what it holds open.
type runningWorker struct {
	client client.Client
	worker sdkworker.Worker
	conn   *connect.Conn
	opts   worker.Options // what it registered (opts.Config().Tools: its tools)
	closes []func()       // run by stop, last first
}

// stop stops the worker, then closes its client, the --mcp servers, the
// desk and the telemetry (its last spans are sent).
func (rw *runningWorker) stop() {
	for i := len(rw.closes) - 1; i >= 0; i-- {
		rw.closes[i]()
	}
	rw.closes = nil
}

// startWorker parses args into fs (with wf's flags) and starts a worker as
// `toolgate worker` does: the demo desk's and the --mcp file's tools, the
// policy, telemetry. Stop it with stop.
func (c *cli) startWorker(ctx context.Context, fs *flag.FlagSet, args []string, wf *workerFlags) (_ *runningWorker, err error) {
	rw := &runningWorker{}
	defer func() {
		if err != nil {
			rw.stop()
		}
	}()
	tel, err := c.parseServing(ctx, fs, args, wf.sv, &wf.cn.EncryptionKeyFile)
	if err != nil {
		return nil, err
	}
	rw.closes = append(rw.closes, tel.stop)
	if wf.check != nil {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		if err := wf.check(given); err != nil {
			return nil, err
		}
	}
	wo, err := wf.sv.workerOptions(tel, c.stderr)
	if err != nil {
		return nil, err
	}
	opts, d, err := demo.OptionsWithDesk(*wf.data, wo.deskDB)
	if err != nil {
		return nil, err
	}
	rw.closes = append(rw.closes, func() { _ = d.Close() })
	if hook := faultAfterCommit(); hook != nil { // nil unless built with -tags toolgate_fault (fault.go)
		d.FailAfterCommit = hook
	}
	mt, err := c.openMCP(ctx, wo.mcpFile, *wf.data)
	if err != nil {
		return nil, err
	}
	rw.closes = append(rw.closes, mt.close)
	if mt != nil {
		opts.Tools = append(opts.Tools, mt.source.Tools()...)
	}
	opts.Tools = append(opts.Tools, wo.remote...)
	opts.AllowAutoApprove, opts.Policy, opts.Interceptors = wo.allowAuto, wo.policy, wo.interceptors
	if wo.workerKey != nil {
		opts.WorkerKey = wo.workerKey
	}
	opts.LedgerUpdatesPerRun = wo.ledgerRun
	opts.Notify = notifierOf(wo.notify)
	// worker.Connect, with the namespace asked for its search attributes
	// between dialing and starting.
	cs := *wf.cn
	cs.Worker = true
	cl, conn, err := connect.Dial(ctx, cs, func(o *client.Options) {
		o.Logger, o.MetricsHandler = c.quietLogger(), tel.handler()
	})
	if err != nil {
		return nil, err
	}
	rw.closes = append(rw.closes, cl.Close)
	if opts.SearchAttributes, err = resolveSearchAttrs(ctx, *wf.searchAttrs, conn.Namespace(), func(ctx context.Context) (*operatorservice.ListSearchAttributesResponse, error) {
		return cl.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: conn.Namespace()})
	}, c.stderr); err != nil {
		return nil, err
	}
	if opts.DataConverter == nil {
		opts.DataConverter, opts.FailureConverter = conn.Options.DataConverter, conn.Options.FailureConverter
	}
	if opts.Authority, err = conn.DialAuthority(ctx, cl, func(o *client.Options) {
		o.Logger, o.MetricsHandler = c.quietLogger(), tel.handler()
	}); err != nil {
		return nil, err
	}
	w, err := worker.Start(cl, *wf.tq, opts)
	if err != nil {
		return nil, err
	}
	rw.client, rw.worker, rw.conn, rw.opts = cl, w, conn, opts
	rw.closes = append(rw.closes, w.Stop)
	return rw, nil
}

// demoGoal is the seed's support-desk request.
const demoGoal = "find the login ticket and close it"

// demo is `toolgate demo`: everything in one command.
func (c *cli) demo(ctx context.Context, args []string) error {
	fs := c.flags("demo")
	data := dataFlag(fs)
	yes := fs.Bool("yes", false, "approve every call that waits for a human, without asking")
	planner := fs.String("planner", plan.KindSupport, "planner: support (rule-based) or openai (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL)")
	policyFile := fs.String("policy", "", "an approval policy (examples/policy.yaml): approvers with an empty key get one the demo makes under DATA/keys, and decide by signed decisions")
	mcpFile := fs.String("mcp", "", "run the MCP demo instead, with this file's filesystem server (examples/mcp-files.yaml): read a file twice, write it (gated), read it again")
	share := fs.String("share", filepath.Join(".toolgate", "share"), "with --mcp: the directory the file's filesystem server serves (made, with a sample file, if missing)")
	notifyFile := fs.String("notify", "", "tell a webhook receiver the demo starts of each waiting call, decision and run's end (examples/notify.yaml), and print what it receives")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *mcpFile != "" {
		if *policyFile != "" || *planner != plan.KindSupport || *notifyFile != "" {
			return errors.New("demo --mcp runs a scripted run without --policy, --planner or --notify")
		}
		return c.demoMCP(ctx, *data, *mcpFile, *share, *yes)
	}
	var ds *demoSigners
	var wo workerOptions
	if *policyFile != "" {
		var err error
		if ds, err = loadDemoPolicy(*policyFile, filepath.Join(*data, "keys")); err != nil {
			return err
		}
		warnPolicy(c.stderr, *policyFile, ds.policy)
		wo.policy = ds.policy
		fmt.Fprintf(c.stdout, "policy %s: approvers' keys in %s\n", *policyFile, ds.dir)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // the inbox's, open first: notifications link to it
	if err != nil {
		return fmt.Errorf("the demo's inbox: %w", err)
	}
	defer ln.Close()
	var rcv *demoReceiver
	if *notifyFile != "" {
		if rcv, wo.notify, err = c.demoNotify(*notifyFile, *data, "http://"+ln.Addr().String()); err != nil {
			return err
		}
		defer rcv.stop()
	}
	// A desk of the demo's own, at its seed: every demo closes TKT-3 and
	// pays its refunds afresh, and the desk of a `toolgate dev` on the same
	// data directory (demo.DeskFile) is never touched.
	if wo.deskDB, err = demo.ResetDesk(ctx, *data); err != nil {
		return fmt.Errorf("the demo's desk: %w", err)
	}
	fmt.Fprintf(c.stdout, "demo desk: %s, reset to its seed (TKT-3 open, no refunds)\n", wo.deskDB)
	fmt.Fprintf(c.stdout, "starting the embedded Temporal server (data in %s) …\n", *data)
	s, err := c.up(ctx, devserver.Options{DataDir: *data, Address: "127.0.0.1:0", Namespace: "default"}, connect.Settings{}, &wo, nil)
	if err != nil {
		return err
	}
	defer s.stop()
	ib, err := c.demoInbox(s, ds, ln)
	if err != nil {
		return err
	}
	defer ib.stop()
	if s.policy {
		// Under a policy the chat starts no thread without callers whose
		// keys sign its starts (docs/agui.md): the demo offers none.
		fmt.Fprintln(c.stdout, "AG-UI chat: off under --policy (a thread's run needs a verified requester: `toolgate dev --agui-address … --agui-tokens FILE`, docs/agui.md)")
	} else {
		ag, err := c.devAGUI("127.0.0.1:0", s, &aguiFlags{planner: planner})
		if err != nil {
			return err
		}
		defer ag.stop()
	}
	id := fmt.Sprintf("demo-%d", time.Now().UnixNano())
	in := workflows.RunInput{Goal: demoGoal, Planner: plan.Config{Kind: *planner}}
	decider := func(id string) func(workflows.Interrupt) error {
		switch {
		case *yes && ds != nil:
			return func(it workflows.Interrupt) error { return c.demoDecide(ctx, ds, s.client, id, true, "", it) }
		case *yes:
			return func(it workflows.Interrupt) error {
				return c.sendAndSay(ctx, s.client, id, "approve", workflows.DecisionInput{CallID: it.CallID, Approver: "demo --yes", ArgsDigest: it.ArgsDigest, Kind: it.Kind})
			}
		case !isTerminal(c.stdin):
			fmt.Fprintf(c.stdout, "(no terminal and no --yes: decide in the approvals inbox above, or from another shell; the server is at %s)\n", s.server.Address())
			if ds != nil {
				fmt.Fprintf(c.stdout, "(sign it as one of the policy's approvers: --as NAME --key %s)\n", ds.keyFile("NAME"))
			}
			return nil
		}
		return c.askAtTerminal(ctx, s.client, id, ds)
	}
	res, err := c.demoRun(ctx, s, id, in, decider)
	if err != nil {
		return err
	}
	if t, err := s.desk.Ticket(ctx, "TKT-3"); err == nil {
		fmt.Fprintf(c.stdout, "\nticket %s %q is %s\n", t.ID, t.Title, t.Status)
	}
	if rcv != nil {
		fmt.Fprintf(c.stdout, "the webhook receiver took %d deliveries, each signed\n", rcv.received())
	}
	if ds == nil || res.Status != workflows.StatusCompleted {
		return resultError(res)
	}
	// With a policy, a second run shows its refund rules at work.
	fmt.Fprintf(c.stdout, "\nand three refunds under the policy's rules:\n")
	res, err = c.demoRun(ctx, s, id+"-refunds", demoRefunds, decider)
	if err != nil {
		return err
	}
	return resultError(res)
}

// demoRefunds is the demo's second run under a policy: a small refund (the
// small-refunds rule lets it run), a large one (two approvers of finance)
// and one marked as a test (the no-test-refunds rule denies it).
var demoRefunds = workflows.RunInput{Goal: "refund the guests", Planner: plan.Config{Kind: plan.KindScripted, Answer: "refunds done",
	Turns: [][]tool.Proposal{{
		{Tool: "refund", Args: json.RawMessage(`{"booking_id":"BK-3","amount_cents":3000,"reason":"late check-in"}`)},
		{Tool: "refund", Args: json.RawMessage(`{"booking_id":"BK-2","amount_cents":30000,"reason":"double charge"}`)},
		{Tool: "refund", Args: json.RawMessage(`{"booking_id":"BK-1","amount_cents":9000,"reason":"test refund"}`)},
	}}}}

// demoRun starts one demo run, follows it (deciding with decider(id)) and
// prints its trace.
func (c *cli) demoRun(ctx context.Context, s *stack, id string, in workflows.RunInput, decider func(string) func(workflows.Interrupt) error) (workflows.RunResult, error) {
	if _, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.WorkflowName, in); err != nil {
		return workflows.RunResult{}, fmt.Errorf("starting the demo run: %w", err)
	}
	fmt.Fprintf(c.stdout, "server at %s; run %s: %q\n\n", s.server.Address(), id, in.Goal)
	res, err := c.follow(ctx, s.client, s.conn, id, decider(id))
	if err != nil {
		return res, err
	}
	fmt.Fprintln(c.stdout, "\ntrace:")
	printTrace(c.stdout, res.Trace)
	return res, nil
}

// askAtTerminal asks the operator to approve or reject each waiting call.
// With the demo's policy (ds), each decision is signed by the demo's
// approvers who may make it.
func (c *cli) askAtTerminal(ctx context.Context, cl client.Client, id string, ds *demoSigners) func(workflows.Interrupt) error {
	in := bufio.NewReader(c.stdin)
	return func(it workflows.Interrupt) error {
		as := envOr("USER", "operator")
		if ds != nil {
			as = strings.Join(ds.deciders(it), " and ")
		}
		for {
			fmt.Fprintf(c.stdout, "approve %s %s as %s? [y]es / [n]o (reject with a reason): ", oneLine(it.Tool), oneLineBytes(it.CallArgs), oneLine(as))
			line, err := in.ReadString('\n')
			if err != nil {
				return fmt.Errorf("reading your answer: %w", err)
			}
			switch strings.ToLower(strings.TrimSpace(line)) {
			case "y", "yes":
				if ds != nil {
					return c.demoDecide(ctx, ds, cl, id, true, "", it)
				}
				return c.sendAndSay(ctx, cl, id, "approve", workflows.DecisionInput{CallID: it.CallID, Approver: as, ArgsDigest: it.ArgsDigest, Kind: it.Kind})
			case "n", "no":
				fmt.Fprint(c.stdout, "reason: ")
				reason, err := in.ReadString('\n')
				if err != nil {
					return fmt.Errorf("reading the reason: %w", err)
				}
				if ds != nil {
					return c.demoDecide(ctx, ds, cl, id, false, strings.TrimSpace(reason), it)
				}
				return c.sendAndSay(ctx, cl, id, "reject", workflows.DecisionInput{CallID: it.CallID, Approver: as,
					Reason: strings.TrimSpace(reason), ArgsDigest: it.ArgsDigest, Kind: it.Kind})
			}
		}
	}
}

func (c *cli) sendAndSay(ctx context.Context, cl client.Client, id, name string, in workflows.DecisionInput) error {
	res, err := sendDecision(ctx, cl, id, name, in)
	if err != nil {
		return fmt.Errorf("%s %s: %w", name, in.CallID, err)
	}
	printDecision(c.stdout, res)
	fmt.Fprintln(c.stdout)
	return nil
}

// isTerminal reports whether r is an interactive terminal (not /dev/null,
// which is a character device too, nor a pipe or a file).
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
