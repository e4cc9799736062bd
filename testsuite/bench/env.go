// Package bench measures what toolgate's safety costs, side by side with bare
// Temporal, on the embedded server (real Temporal, SQLite file persistence)
// in one process: the same server, the same worker, the same activities.
//
// The toolgate side is AgentRun with the scripted planner (evaluated in the
// workflow, no planner activity), so what is compared is the call itself:
// check, gate, memo, run, trace. The bare side is Bare, a workflow that
// executes the same activities (same names, same tool.Request input) one
// after another with nothing around them. Since a toolgate worker's tools
// run only with a permit (package permit), which Bare has none of, Bare and
// the same tool functions, unguarded, run on a second worker of the same
// process on a task queue of their own (BareTaskQueue): the permit is part
// of the cost measured.
//
// `go test -bench . ./testsuite/bench` runs the suite as benchmarks;
// `go run ./cmd/toolgate-bench` prints it as a table (see BENCHMARKS.md).
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/authority"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// The benchmark's tools: no-op-ish, so what is measured is the framework
// around them. Each takes {"n": int} and returns its arguments.
const (
	Echo      = "echo"       // a read: non-destructive, a regular activity
	EchoLocal = "echo_local" // a read registered as a local activity
	Write     = "write"      // a destructive call: gated
)

// TaskQueue is the task queue of the benchmark's worker.
const TaskQueue = "toolgate-bench"

// BareWorkflowName is the workflow type of the bare baseline.
const BareWorkflowName = "BenchBare"

// BareTaskQueue is the task queue of the bare baseline's worker: Bare and the
// same tool functions, without the permit check.
const BareTaskQueue = "toolgate-bench-bare"

// argsSchema is the tools' argument schema: AgentRun validates every call
// against it (part of the cost being measured); Bare does not.
const argsSchema = `{"type":"object","properties":{"n":{"type":"integer"},"pad":{"type":"string"}},"required":["n"],"additionalProperties":false}`

// Args are the tools' arguments.
type Args struct {
	N   int    `json:"n"`
	Pad string `json:"pad,omitempty"`
}

// ArgsJSON is the canonical JSON of {"n": n}.
func ArgsJSON(n int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)) }

func echo(_ context.Context, a Args) (Args, error) { return a, nil }

// Tools are the tools the benchmark's worker registers.
func Tools() []tool.Tool {
	return []tool.Tool{
		tool.New(tool.Spec{Name: Echo, Description: "returns its arguments", Schema: json.RawMessage(argsSchema)}, echo),
		tool.New(tool.Spec{Name: EchoLocal, Description: "returns its arguments (local activity)", Schema: json.RawMessage(argsSchema), Local: true}, echo),
		tool.New(tool.Spec{Name: Write, Description: "pretends to write; returns its arguments", Schema: json.RawMessage(argsSchema), Destructive: true}, echo),
	}
}

// localTools says which tools run as local activities (Bare follows the same
// declarations as AgentRun).
var localTools = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range Tools() {
		m[t.Spec.Name] = t.Spec.Local
	}
	return m
}()

// BareInput is Bare's input: the calls to make, in order.
type BareInput struct {
	Calls []tool.Proposal `json:"calls"`
}

// Bare is the baseline: it executes each call's activity directly, one after
// another, with the same activity name, the same tool.Request (call id,
// idempotency key, arguments) and the same retry policy and timeout as
// AgentRun would use — and no check, gate, memo or trace. It returns the
// number of calls made.
func Bare(ctx workflow.Context, in BareInput) (int, error) {
	info := workflow.GetInfo(ctx)
	wid, chain := info.WorkflowExecution.ID, info.FirstRunID
	retry := &temporal.RetryPolicy{
		InitialInterval:    tool.DefaultInitialInterval,
		BackoffCoefficient: 2,
		MaximumInterval:    time.Minute,
		MaximumAttempts:    tool.DefaultMaxAttempts,
	}
	for i, p := range in.Calls {
		id := fmt.Sprintf("c-%d", i+1)
		d, _ := tool.Digest(p.Tool, p.Args) // as AgentRun keys a call (rules version 7)
		req := tool.Request{CallID: id, IdempotencyKey: tool.ArgsKey(tool.IdempotencyKey(wid, chain, id), d), Args: p.Args}
		var resp tool.Response
		var err error
		if localTools[p.Tool] {
			lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: tool.DefaultTimeout, RetryPolicy: retry})
			err = workflow.ExecuteLocalActivity(lctx, p.Tool, req).Get(lctx, &resp)
		} else {
			actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{ActivityID: id, StartToCloseTimeout: tool.DefaultTimeout, RetryPolicy: retry})
			err = workflow.ExecuteActivity(actx, p.Tool, req).Get(actx, &resp)
		}
		if err != nil {
			return i, fmt.Errorf("call %s (%s): %w", id, p.Tool, err)
		}
	}
	return len(in.Calls), nil
}

// Options configure Start.
type Options struct {
	// DataDir holds the server's SQLite file. "" means a new temporary
	// directory, removed by Stop.
	DataDir string
	// ServerLog receives the embedded server's logs; nil discards them.
	ServerLog *slog.Logger
	// StockQueuePolling runs the server with the stock server's queue poll
	// rate (devserver.StockQueuePolling: 20 reads a second per shard)
	// instead of toolgate's, to measure what toolgate's changes.
	StockQueuePolling bool
}

// Env is an embedded Temporal server with one worker that runs both AgentRun
// (with the benchmark's tools, always_approve allowed, toolgate's search
// attributes kept current as under `toolgate dev`) and Bare.
type Env struct {
	Server  *devserver.Server
	Client  client.Client
	DataDir string
	// Authority is a client of the server's authority namespace (the
	// guard queues' workers run the fleet ledger there).
	Authority *authority.Conn
	// QueuePoll is the server's queue poll rate, reads a second per shard.
	QueuePoll int

	worker   sdkworker.Worker
	bare     sdkworker.Worker
	replayer sdkworker.WorkflowReplayer
	tempDir  bool
	seq      atomic.Int64
}

// searchAttributes are the ones `toolgate dev` registers.
var searchAttributes = map[string]enumspb.IndexedValueType{
	workflows.SearchAttrStatus:       enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	workflows.SearchAttrPendingTools: enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
	workflows.SearchAttrForkedFrom:   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}

// quietLogger is the SDK logger of the benchmark: errors only, to stderr;
// and it counts the workflow tasks the workers failed (WorkflowTaskFailures).
func quietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(countingHandler{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})}))
}

// wftFailures counts the workflow tasks the benchmark's workers failed, as
// their logs say ("Failed to process workflow task."), by workflow type.
var wftFailures sync.Map // workflow type → *atomic.Int64

// WorkflowTaskFailures is how many workflow tasks of workflowType the
// benchmark's workers have failed so far, from their logs: a failure the
// server does not write to the history (a worker that could not read it,
// temporalio/temporal#7741) shows only there.
func WorkflowTaskFailures(workflowType string) int64 {
	if n, ok := wftFailures.Load(workflowType); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// countingHandler counts the SDK's "Failed to process workflow task." (a
// warning) and passes on what its handler takes.
type countingHandler struct{ slog.Handler }

// Enabled: warnings and errors (the failure is a warning; debug and info
// records would cost the benchmark's workers time).
func (h countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "Failed to process workflow task") {
		typ := "?"
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "WorkflowType" {
				typ = a.Value.String()
				return false
			}
			return true
		})
		n, _ := wftFailures.LoadOrStore(typ, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return countingHandler{h.Handler.WithAttrs(as)}
}

func (h countingHandler) WithGroup(name string) slog.Handler {
	return countingHandler{h.Handler.WithGroup(name)}
}

// Start starts the server and the worker. Call Stop when done.
func Start(ctx context.Context, o Options) (_ *Env, err error) {
	e := &Env{DataDir: o.DataDir}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	if e.DataDir == "" {
		if e.DataDir, err = os.MkdirTemp("", "toolgate-bench-"); err != nil {
			return nil, err
		}
		e.tempDir = true
	}
	so := devserver.Options{DataDir: e.DataDir, SearchAttributes: searchAttributes, Logger: o.ServerLog}
	e.QueuePoll = devserver.QueuePollRPS
	if o.StockQueuePolling {
		e.QueuePoll = devserver.StockQueuePollRPS
		so.DynamicConfig = devserver.StockQueuePolling()
	}
	e.Server, err = devserver.Start(ctx, so)
	if err != nil {
		return nil, fmt.Errorf("starting the embedded server: %w", err)
	}
	e.Client, err = client.DialContext(ctx, client.Options{HostPort: e.Server.Address(), Namespace: e.Server.Namespace(), Logger: quietLogger()})
	if err != nil {
		return nil, fmt.Errorf("dialing the embedded server: %w", err)
	}
	ac, err := client.NewClientFromExisting(e.Client, client.Options{Namespace: e.Server.AuthorityNamespace(), Logger: quietLogger()})
	if err != nil {
		return nil, fmt.Errorf("a client of the authority namespace: %w", err)
	}
	e.Authority = &authority.Conn{Client: ac, Namespace: e.Server.AuthorityNamespace()}
	w := sdkworker.New(e.Client, TaskQueue, sdkworker.Options{})
	if err := worker.Register(w, worker.Options{Tools: Tools(), AllowAutoApprove: true, SearchAttributes: true}); err != nil {
		return nil, err
	}
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("starting the worker: %w", err)
	}
	e.worker = w
	bw := sdkworker.New(e.Client, BareTaskQueue, sdkworker.Options{})
	bw.RegisterWorkflowWithOptions(Bare, workflow.RegisterOptions{Name: BareWorkflowName})
	for _, t := range Tools() {
		bw.RegisterActivityWithOptions(tool.Bounded(t.Run), activity.RegisterOptions{Name: t.Spec.Name})
	}
	if err := bw.Start(); err != nil {
		return nil, fmt.Errorf("starting the bare worker: %w", err)
	}
	e.bare = bw
	e.replayer = sdkworker.NewWorkflowReplayer()
	e.replayer.RegisterWorkflowWithOptions(workflows.AgentRun, workflow.RegisterOptions{Name: workflows.WorkflowName})
	e.replayer.RegisterWorkflowWithOptions(Bare, workflow.RegisterOptions{Name: BareWorkflowName})
	return e, nil
}

// Stop stops the worker and the server, and removes a temporary data directory.
func (e *Env) Stop() {
	if e.worker != nil {
		e.worker.Stop()
	}
	if e.bare != nil {
		e.bare.Stop()
	}
	if e.Client != nil {
		e.Client.Close()
	}
	if e.Server != nil {
		_ = e.Server.Stop()
	}
	if e.tempDir {
		_ = os.RemoveAll(e.DataDir)
	}
}

// RunRef names a finished workflow (its first run) and when it ran.
type RunRef struct {
	ID, RunID string // the workflow id and the first run's id
	// Start and End are the server's times of the first run's
	// WorkflowExecutionStarted event and of the last run's close event.
	Start, End time.Time
	// Elapsed is End-Start: the run's duration as the server recorded it.
	// (Timings use it rather than the client's clock: on the embedded server
	// the client's long poll for the result now and then returns ~20 s after
	// the run has closed, which would swamp the figures.)
	Elapsed time.Duration
}

// span fills in Start, End and Elapsed from the server's events.
func (e *Env) span(ctx context.Context, r *RunRef) error {
	it := e.Client.GetWorkflowHistory(ctx, r.ID, r.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return fmt.Errorf("run %s has no history", r.ID)
	}
	first, err := it.Next()
	if err != nil {
		return err
	}
	it = e.Client.GetWorkflowHistory(ctx, r.ID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	if !it.HasNext() {
		return fmt.Errorf("run %s has no close event", r.ID)
	}
	last, err := it.Next()
	if err != nil {
		return err
	}
	r.Start, r.End = first.GetEventTime().AsTime(), last.GetEventTime().AsTime()
	r.Elapsed = r.End.Sub(r.Start)
	return nil
}

func (e *Env) newID(kind string) string {
	return fmt.Sprintf("bench-%s-%d-%d", kind, time.Now().UnixNano(), e.seq.Add(1))
}

// Agent runs AgentRun to its end (following continue-as-new) and returns its result.
func (e *Env) Agent(ctx context.Context, in workflows.RunInput) (RunRef, workflows.RunResult, error) {
	return e.agent(ctx, in, nil)
}

// agent runs AgentRun; while it runs, during(id, runID) may act on it (approve calls).
func (e *Env) agent(ctx context.Context, in workflows.RunInput, during func(ctx context.Context, id, runID string) error) (RunRef, workflows.RunResult, error) {
	var res workflows.RunResult
	r := RunRef{ID: e.newID("agent")}
	wr, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: r.ID, TaskQueue: TaskQueue}, workflows.WorkflowName, in)
	if err != nil {
		return r, res, err
	}
	r.RunID = wr.GetRunID()
	errc := make(chan error, 1)
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if during != nil {
		go func() { errc <- during(dctx, r.ID, r.RunID) }()
	}
	if err := wr.Get(ctx, &res); err != nil {
		return r, res, fmt.Errorf("run %s: %w", r.ID, err)
	}
	if during != nil {
		cancel()
		if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
			return r, res, err
		}
	}
	if res.Status != workflows.StatusCompleted {
		return r, res, fmt.Errorf("run %s ended %s: %s", r.ID, res.Status, res.Error)
	}
	return r, res, e.span(ctx, &r)
}

// Bare runs the bare baseline over calls.
func (e *Env) Bare(ctx context.Context, calls []tool.Proposal) (RunRef, error) {
	r := RunRef{ID: e.newID("bare")}
	wr, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: r.ID, TaskQueue: BareTaskQueue}, BareWorkflowName, BareInput{Calls: calls})
	if err != nil {
		return r, err
	}
	r.RunID = wr.GetRunID()
	var n int
	if err := wr.Get(ctx, &n); err != nil {
		return r, fmt.Errorf("bare run %s: %w", r.ID, err)
	}
	if n != len(calls) {
		return r, fmt.Errorf("bare run %s made %d of %d calls", r.ID, n, len(calls))
	}
	return r, e.span(ctx, &r)
}

// approveEach approves, one by one as each becomes pending, the calls a
// human-policy run waits for: it polls the state query and sends the approve
// signal (or update) as soon as a call waits. Queries add no history events.
func (e *Env) approveEach(viaUpdate bool) func(ctx context.Context, id, runID string) error {
	return func(ctx context.Context, id, runID string) error {
		done := map[string]bool{}
		for {
			v, err := e.Client.QueryWorkflow(ctx, id, runID, workflows.QueryState)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("querying %s: %w", id, err)
			}
			var s workflows.State
			if err := v.Get(&s); err != nil {
				return err
			}
			if s.Status != workflows.StatusRunning && s.Status != workflows.StatusWaitingForApproval {
				return nil
			}
			for _, it := range s.Interrupts {
				if done[it.CallID] {
					continue
				}
				done[it.CallID] = true
				d := workflows.DecisionInput{CallID: it.CallID, Approver: "bench", ArgsDigest: it.ArgsDigest}
				if viaUpdate {
					h, err := e.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, RunID: runID,
						UpdateName: workflows.UpdateApprove, Args: []any{d}, WaitForStage: client.WorkflowUpdateStageCompleted})
					if err == nil {
						err = h.Get(ctx, nil)
					}
					if err != nil {
						return fmt.Errorf("approving %s of %s: %w", it.CallID, id, err)
					}
				} else if err := e.Client.SignalWorkflow(ctx, id, runID, workflows.SignalApprove, d); err != nil {
					return fmt.Errorf("approving %s of %s: %w", it.CallID, id, err)
				}
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
}

// History fetches one run's full history.
func (e *Env) History(ctx context.Context, id, runID string) (*historypb.History, error) {
	it := e.Client.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s/%s: %w", id, runID, err)
		}
		h.Events = append(h.Events, ev)
	}
	return h, nil
}

// RunHistory is one run of a chain and its history.
type RunHistory struct {
	RunID   string
	History *historypb.History
}

// Chain fetches the history of every run of a workflow from its first run,
// following continue-as-new.
func (e *Env) Chain(ctx context.Context, id, firstRunID string) ([]RunHistory, error) {
	var out []RunHistory
	for runID := firstRunID; runID != ""; {
		h, err := e.History(ctx, id, runID)
		if err != nil {
			return nil, err
		}
		out = append(out, RunHistory{RunID: runID, History: h})
		runID = ""
		if n := len(h.Events); n > 0 {
			if can := h.Events[n-1].GetWorkflowExecutionContinuedAsNewEventAttributes(); can != nil {
				runID = can.GetNewExecutionRunId()
			}
		}
		if len(out) > 10000 {
			return nil, errors.New("continue-as-new chain longer than 10000 runs")
		}
	}
	return out, nil
}

// Replay replays one run's history against this build's workflow code and
// reports how long it took. A non-deterministic history is an error.
func (e *Env) Replay(id string, rh RunHistory) (time.Duration, error) {
	start := time.Now()
	err := e.replayer.ReplayWorkflowHistoryWithOptions(quietLogger(), rh.History,
		sdkworker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: id, RunID: rh.RunID}})
	return time.Since(start), err
}

// Calls builds n sequential steps of one call each: tool(n=first), tool(n=first+1), ….
func Calls(toolName string, first, n int) []tool.Proposal {
	out := make([]tool.Proposal, n)
	for i := range out {
		out[i] = tool.Proposal{Tool: toolName, Args: ArgsJSON(first + i)}
	}
	return out
}

// Repeat builds n calls of tool with the same arguments {"n": arg}.
func Repeat(toolName string, arg, n int) []tool.Proposal {
	out := make([]tool.Proposal, n)
	for i := range out {
		out[i] = tool.Proposal{Tool: toolName, Args: ArgsJSON(arg)}
	}
	return out
}

// Input is an AgentRun input whose scripted planner proposes calls one per
// step, in order, then answers.
func Input(approval string, calls ...[]tool.Proposal) workflows.RunInput {
	var turns [][]tool.Proposal
	for _, cs := range calls {
		for _, c := range cs {
			turns = append(turns, []tool.Proposal{c})
		}
	}
	return workflows.RunInput{Goal: "bench", Approval: approval,
		Planner: plan.Config{Kind: plan.KindScripted, Turns: turns, Answer: "done"}, MaxTurns: len(turns) + 1}
}
