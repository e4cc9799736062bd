package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/toolgate/toolgate/activities/desk"
	"github.com/toolgate/toolgate/authority"
	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/demo"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// Timeouts of the suite. They bound waits; no test sleeps to assert.
const (
	startTimeout = time.Minute      // server start, worker start
	waitTimeout  = 30 * time.Second // a run reaching a state
	rpcTimeout   = 15 * time.Second // one client call
)

// ---------------------------------------------------------------------------
// Server, client, in-process worker

// stack is one test's embedded server on its own data directory, and a
// client of it.
type stack struct {
	t       *testing.T
	dataDir string
	// serverDB and deskDB are PostgreSQL URLs (newPGStack): the server's
	// database and the desk's. Empty: SQLite files under dataDir.
	serverDB, deskDB string
	server           *devserver.Server // nil when the server is a subprocess
	external         string            // that subprocess's frontend address
	client           client.Client     // the Temporal client, for what a stock client does (signals, raw starts)
	tg               *tgclient.Client  // toolgate's client on it, for everything else
	sdkLog           *syncBuffer       // the SDK's warnings and errors, shown when the test fails
	nexus            bool              // the server serves Nexus operations (newNexusStack)
}

// newStack starts an embedded server on a fresh data directory and dials it.
func newStack(t *testing.T) *stack {
	t.Helper()
	return startStack(t, false)
}

// newNexusStack is newStack, its server serving Nexus operations.
func newNexusStack(t *testing.T) *stack {
	t.Helper()
	return startStack(t, true)
}

func startStack(t *testing.T, nexus bool) *stack {
	t.Helper()
	s := &stack{t: t, dataDir: t.TempDir(), sdkLog: &syncBuffer{}, nexus: nexus}
	t.Cleanup(func() {
		if t.Failed() && s.sdkLog.Len() > 0 {
			t.Logf("SDK log:\n%s", s.sdkLog.String())
		}
	})
	s.startServer()
	return s
}

// startServer starts (or starts again) the server on the stack's data
// directory, on a free port, and dials it.
func (s *stack) startServer() {
	t := s.t
	t.Helper()
	srv, c := testenv.StartServer(t, testenv.ServerOptions{DataDir: s.dataDir, Database: s.serverDB, Timeout: startTimeout, StrictStop: true, Nexus: s.nexus,
		Client: client.Options{Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(s.sdkLog, &slog.HandlerOptions{Level: slog.LevelWarn})))}})
	s.server = srv
	s.client = c
	s.tg = tgclient.New(c)
}

// address is the frontend's address.
func (s *stack) address() string {
	if s.server == nil {
		return s.external
	}
	return s.server.Address()
}

// stopServer stops the server and closes the client (a restart test then
// calls startServer again).
func (s *stack) stopServer() {
	s.t.Helper()
	s.client.Close()
	if err := s.server.Stop(); err != nil {
		s.t.Fatalf("stopping the server: %v", err)
	}
}

// inWorker is a toolgate worker in this process: the demo desk on the
// stack's data directory, like `toolgate worker`.
type inWorker struct {
	w    sdkworker.Worker
	desk *desk.Desk
	once sync.Once
}

func (w *inWorker) stop() {
	w.once.Do(func() {
		w.w.Stop()
		_ = w.desk.Close()
	})
}

// startWorker starts an in-process worker on the stack's client.
func (s *stack) startWorker(allowAutoApprove bool) *inWorker {
	return s.startWorkerWith(func(o *worker.Options) { o.AllowAutoApprove = allowAutoApprove })
}

// startWorkerWith starts an in-process worker on the stack's client, its
// options (the demo desk's, with search attributes) changed by edit.
func (s *stack) startWorkerWith(edit func(*worker.Options)) *inWorker {
	t := s.t
	t.Helper()
	opts, d, err := demo.OptionsWithDesk(s.dataDir, s.deskDB)
	if err != nil {
		t.Fatalf("demo.Options: %v", err)
	}
	opts.SearchAttributes = true
	opts.Authority = s.authority() // as every toolgate worker runs: authority apart
	edit(&opts)
	w, err := worker.Start(s.client, workflows.TaskQueue, opts)
	if err != nil {
		_ = d.Close()
		t.Fatalf("worker.Start: %v", err)
	}
	iw := &inWorker{w: w, desk: d}
	t.Cleanup(iw.stop)
	return iw
}

// authorityNamespace is the authority namespace of the stack's server.
func (s *stack) authorityNamespace() string { return authority.Namespace(devserver.DefaultNamespace) }

// authority is a client of the stack's authority namespace over the stack's
// client (its credential: a worker's on an auth stack).
func (s *stack) authority() *authority.Conn {
	return &authority.Conn{Client: s.inAuthority(s.client), Namespace: s.authorityNamespace()}
}

// inAuthority is a client of the authority namespace over c's connection
// (and credential).
func (s *stack) inAuthority(c client.Client) client.Client {
	s.t.Helper()
	ac, err := client.NewClientFromExisting(c, client.Options{Namespace: s.authorityNamespace(), Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		s.t.Fatalf("a client of the authority namespace: %v", err)
	}
	return ac
}

// deskPath is the demo desk's SQLite file, or its PostgreSQL URL, shared by
// workers and assertions.
func (s *stack) deskPath() string {
	if s.deskDB != "" {
		return s.deskDB
	}
	return filepath.Join(s.dataDir, demo.DeskFile)
}

// openDesk opens the desk's database for assertions (WAL: it may be open in a
// worker, in this process or another, at the same time).
func (s *stack) openDesk() *desk.Desk {
	s.t.Helper()
	d, err := desk.Connect(s.deskPath())
	if err != nil {
		s.t.Fatalf("opening the desk: %v", err)
	}
	s.t.Cleanup(func() { _ = d.Close() })
	return d
}

// openDB opens the desk's database (read-only, for SQLite) through
// database/sql, for the counts the desk has no method for. Write its queries
// with ? placeholders and pass them through s.sql.
func (s *stack) openDB() *sql.DB {
	s.t.Helper()
	if s.deskDB != "" {
		db, err := sql.Open("pgx", s.deskDB)
		if err != nil {
			s.t.Fatalf("opening the desk's database: %v", err)
		}
		s.t.Cleanup(func() { _ = db.Close() })
		return db
	}
	db, err := sql.Open("sqlite", "file:"+s.deskPath()+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		s.t.Fatalf("opening %s: %v", s.deskPath(), err)
	}
	s.t.Cleanup(func() { _ = db.Close() })
	return db
}

// ---------------------------------------------------------------------------
// Runs

// scripted is a scripted planner over steps (an empty step ends a user turn).
func scripted(answer string, steps ...[]tool.Proposal) plan.Config {
	return plan.Config{Kind: plan.KindScripted, Turns: steps, Answer: answer}
}

// step is one planner step: calls proposed together.
func step(calls ...tool.Proposal) []tool.Proposal {
	if calls == nil {
		return []tool.Proposal{}
	}
	return calls
}

// call is one proposal.
func call(toolName, args string) tool.Proposal {
	return tool.Proposal{Tool: toolName, Args: json.RawMessage(args)}
}

// clientStart are the start options of a run with this workflow id.
func clientStart(id string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}
}

// start starts an AgentRun through toolgate's client.
func (s *stack) start(id string, in workflows.RunInput) client.WorkflowRun {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	run, err := s.tg.Start(ctx, id, in)
	if err != nil {
		s.t.Fatalf("starting run %s: %v", id, err)
	}
	return run
}

// state queries the run's state.
func (s *stack) state(id string) (workflows.State, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	return s.tg.State(ctx, id)
}

// mustState queries the run's state or fails.
func (s *stack) mustState(id string) workflows.State {
	s.t.Helper()
	st, err := s.state(id)
	if err != nil {
		s.t.Fatalf("query state of %s: %v", id, err)
	}
	return st
}

// mustTrace queries the run's trace or fails.
func (s *stack) mustTrace(id string) []workflows.TraceRecord {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	tr, err := s.tg.Trace(ctx, id)
	if err != nil {
		s.t.Fatalf("query trace of %s: %v", id, err)
	}
	return tr
}

// awaitNext polls the query `next` until it equals want.
func (s *stack) awaitNext(id string, timeout time.Duration, want ...string) {
	s.t.Helper()
	testenv.Eventually(s.t, timeout, fmt.Sprintf("next of %s = %q", id, want), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		next, err := s.tg.Next(ctx, id)
		if err != nil {
			return err
		}
		if !equal(next, want) {
			return fmt.Errorf("next is %q", next)
		}
		return nil
	})
}

// awaitStatus polls the query `state` until the run has status (and, when
// turn > 0, is in that turn), and returns that state.
func (s *stack) awaitStatus(id, status string, turn int, timeout time.Duration) workflows.State {
	s.t.Helper()
	var st workflows.State
	testenv.Eventually(s.t, timeout, fmt.Sprintf("%s %s (turn %d)", id, status, turn), func() error {
		var err error
		if st, err = s.state(id); err != nil {
			return err
		}
		if st.Status != status || (turn > 0 && st.Turn != turn) {
			return fmt.Errorf("status %s, turn %d", st.Status, st.Turn)
		}
		return nil
	})
	return st
}

// result waits for the run's result (following continue-as-new).
func (s *stack) result(id string, timeout time.Duration) workflows.RunResult {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := s.tg.Result(ctx, id)
	if err != nil {
		s.t.Fatalf("result of %s: %v", id, err)
	}
	return res
}

// decideWaiting waits until run id waits on node alone, with callID, and
// approves or rejects it ("wrong order") by update, as alice.
func (s *stack) decideWaiting(id, node, callID string, approve bool) {
	t := s.t
	t.Helper()
	s.awaitNext(id, waitTimeout, node)
	st := s.mustState(id)
	if len(st.Interrupts) != 1 || st.Interrupts[0].CallID != callID {
		t.Fatalf("interrupts %+v, want %s's", st.Interrupts, callID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	in := workflows.DecisionInput{CallID: callID, Approver: "alice", ArgsDigest: st.Interrupts[0].ArgsDigest, Reason: "wrong order"}
	if _, err := s.tg.Decide(ctx, id, approve, in); err != nil {
		t.Fatalf("deciding %s: %v", callID, err)
	}
}

// approveByUpdate approves a call with the approve update and waits for the
// decision.
func (s *stack) approveByUpdate(id string, in workflows.DecisionInput) (workflows.DecisionResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	return s.tg.Decide(ctx, id, true, in)
}

// key is the idempotency key of callID in workflow id's current chain:
// <workflow id>/<the chain's first run id>/<call id>/<args digest, 16 hex>
// (tool.ArgsKey), the arguments those the trace says the call ran with.
func (s *stack) key(id, callID string) string {
	s.t.Helper()
	var rec workflows.TraceRecord
	for _, r := range s.mustTrace(id) {
		if r.CallID == callID && len(r.Args) > 0 {
			rec = r
		}
	}
	if rec.CallID == "" {
		s.t.Fatalf("run %s: no trace record of %s holds its arguments", id, callID)
	}
	return s.keyFor(id, callID, rec.Tool, string(rec.Args))
}

// keyFor is the idempotency key of callID in workflow id's current chain,
// the call being of toolName with args.
func (s *stack) keyFor(id, callID, toolName, args string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	desc, err := s.client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		s.t.Fatalf("describing %s: %v", id, err)
	}
	d, err := tool.Digest(toolName, json.RawMessage(args))
	if err != nil {
		s.t.Fatalf("run %s: %s's arguments: %v", id, callID, err)
	}
	return tool.ArgsKey(tool.IdempotencyKey(id, desc.GetWorkflowExecutionInfo().GetFirstRunId(), callID), d)
}

// signal sends a signal to the current run of id.
func (s *stack) signal(id, name string, arg any) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	if err := s.client.SignalWorkflow(ctx, id, "", name, arg); err != nil {
		s.t.Fatalf("signal %s to %s: %v", name, id, err)
	}
}

// event is a trace record reduced to what the tests compare.
type event struct{ call, tool, status string }

func (e event) String() string { return e.call + " " + e.tool + " " + e.status }

func events(trace []workflows.TraceRecord) []event {
	out := make([]event, len(trace))
	for i, r := range trace {
		out[i] = event{r.CallID, r.Tool, r.Status}
	}
	return out
}

// checkEvents fails unless the trace is exactly want (call, tool, status).
func checkEvents(t *testing.T, what string, trace []workflows.TraceRecord, want ...event) {
	t.Helper()
	got := events(trace)
	if !equal(got, want) {
		t.Fatalf("%s:\n got  %v\n want %v", what, got, want)
	}
}

// records returns the trace records of one call with one status.
func records(trace []workflows.TraceRecord, callID, status string) []workflows.TraceRecord {
	var out []workflows.TraceRecord
	for _, r := range trace {
		if r.CallID == callID && r.Status == status {
			out = append(out, r)
		}
	}
	return out
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// Subprocesses

// syncBuffer is a bytes.Buffer safe for a subprocess and the test at once.
type syncBuffer = testenv.Buffer

// proc is a toolgate subprocess.
type proc struct {
	name    string
	cmd     *exec.Cmd
	out     *syncBuffer
	done    chan struct{}
	waitErr error // set when done is closed
}

// childEnv is this process's environment without the variables that would
// change what a toolgate subprocess does, plus extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "TOOLGATE_") || strings.HasPrefix(kv, "TEMPORAL_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// startProc starts the toolgate binary. Its output is kept and logged only if
// the test fails; the process is killed when the test ends.
func startProc(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(toolgateBinary(t), args...)
	cmd.Env = childEnv(env...)
	return startCmd(t, name, cmd)
}

// startCmd starts cmd as startProc does: its output kept and logged only
// if the test fails, the process killed when the test ends.
func startCmd(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{name: name, out: &syncBuffer{}, done: make(chan struct{}), cmd: cmd}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Errorf("%s (pid %d) did not exit after SIGKILL", name, p.cmd.Process.Pid)
		}
		if t.Failed() {
			t.Logf("%s (pid %d) output:\n%s", name, p.cmd.Process.Pid, p.out.String())
		}
	})
	return p
}

// kill sends SIGKILL (kill -9): no cleanup, no graceful shutdown.
func (p *proc) kill() { _ = p.cmd.Process.Kill() }

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to exit and returns cmd.Wait's error.
func (p *proc) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.waitErr
	case <-time.After(timeout):
		t.Fatalf("%s (pid %d) still running after %v", p.name, p.cmd.Process.Pid, timeout)
		return nil
	}
}

// startWorkerProc starts `toolgate worker` against the stack's server and
// waits until it polls the toolgate task queue for both workflow and activity
// tasks (its pollers carry its pid in their identity).
func (s *stack) startWorkerProc(name string, env []string, flags ...string) *proc {
	t := s.t
	t.Helper()
	args := append([]string{"worker", "--address", s.address(), "--namespace", devserver.DefaultNamespace,
		"--data", s.dataDir, "--search-attributes"}, flags...)
	if s.deskDB != "" {
		args = append(args, "--desk-db", s.deskDB)
	}
	p := startProc(t, name, env, args...)
	prefix := fmt.Sprintf("%d@", p.cmd.Process.Pid)
	testenv.Eventually(t, startTimeout, name+" polling", func() error {
		if p.exited() {
			t.Fatalf("%s exited before polling: %v\n%s", name, p.waitErr, p.out.String())
		}
		for _, typ := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
			ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
			resp, err := s.client.DescribeTaskQueue(ctx, workflows.TaskQueue, typ)
			cancel()
			if err != nil {
				return err
			}
			found := false
			for _, pi := range resp.GetPollers() {
				found = found || strings.HasPrefix(pi.GetIdentity(), prefix)
			}
			if !found {
				return fmt.Errorf("no %s poller with identity %s…", typ, prefix)
			}
		}
		return nil
	})
	return p
}

// runCLI runs one toolgate client command and returns its combined output
// and exit code (-1 when it did not exit by itself in time).
// cliAt returns a runner of the toolgate CLI against address (its args then
// --address address) that fails the test on an exit code other than want.
func cliAt(t *testing.T, address string) func(want int, args ...string) string {
	return func(want int, args ...string) string {
		t.Helper()
		out, code := runCLI(t, waitTimeout, append(args, "--address", address)...)
		if code != want {
			t.Fatalf("toolgate %s: exit %d, want %d:\n%s", strings.Join(args, " "), code, want, out)
		}
		return out
	}
}

// writeFile writes content to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func runCLI(t *testing.T, timeout time.Duration, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, toolgateBinary(t), args...)
	cmd.Env = childEnv()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("toolgate %s: no exit within %v; output:\n%s", strings.Join(args, " "), timeout, out)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	default:
		t.Fatalf("toolgate %s: %v", strings.Join(args, " "), err)
		return "", -1
	}
}

// longSuite marks a suite that takes long: workers and servers killed and
// restarted, PostgreSQL failover, other languages' SDKs, notification
// retries. It runs with TOOLGATE_LONG_TESTS=1, as .ci/run sets; the
// README's test command leaves it out, to finish in a few minutes
// (docs/development.md lists them).
func longSuite(t *testing.T) {
	t.Helper()
	if os.Getenv("TOOLGATE_LONG_TESTS") != "1" {
		t.Skip("a long suite (kills, restarts, failover, other SDKs): TOOLGATE_LONG_TESTS=1 runs it, as CI does")
	}
}
