// Package workflows holds AgentRun, toolgate's workflow: a planner proposes
// tool calls, and every call passes gate → memo → run → fallback, as named
// stages (pipeline.go).
// The code here is pure decision-making over workflow state: all I/O is in
// activities, time comes from workflow.Now, and nothing ranges over a map.
package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/tool"
)

// run is one AgentRun's state. It lives only inside the workflow function.
// Carry is everything a run hands to the next run of its chain when it
// continues as new, so a field added there is carried without a second list
// to keep in step (carry_test.go checks the round trip).
type run struct {
	Carry // Memo, MemoHits and MemoMisses are the memo's carried form: in use, the memo is memo

	in         RunInput
	workflowID string
	policy     string
	specs      map[string]tool.Spec
	tools      *validator
	memo       *memo
	// engine is the worker's policy, compiled (nil: none); exprs caches the
	// compiled conditions of grants by grant id.
	engine *policy.Engine
	exprs  map[string]*policy.Expr

	progress   int        // steps and turns begun by this run (not carried)
	traceSizes []int      // JSON size of each kept trace record
	traceBytes int        // sum of traceSizes
	pending    []*pending // calls waiting for a human, in the order they asked

	done      string // terminal status, once reached
	errText   string
	blockedOn *tool.ConfirmationRequired

	// The run's state by concern, each kept in the file of its concern
	// (issue #47): parking (park.go), the external planner's calls
	// (external.go), deliveries (notify.go), a fork and a rewind
	// (fork.go, rewind.go), the fleet ledger (guards.go), uses being
	// claimed (spent.go), the history's length (continue.go).
	parkState
	externalState
	notifyState
	forkState
	guardState
	claimState
	historyState

	// ready: the run is configured (its tools and policy are loaded), so it
	// may take decisions (a continued run may hold parked calls from its
	// first workflow task on).
	ready bool
	// version is this run's rules version (see versionChangeID).
	version workflow.Version
	// obs watches a replay of this run (Observe); nil when it runs.
	obs *Observer
	// policyDigest caches the digest of the policy the run is held to, for
	// its permits' rules (permit.go).
	policyDigest string

	now     func() time.Time
	logger  interface{ Warn(string, ...any) }
	metrics client.MetricsHandler
	shown   string // last status published to search attributes / details
}

// AgentRun runs an agent: it asks the planner for calls, puts each call
// through gate → memo → run → fallback, feeds the outcomes back, and ends with
// the planner's answer — or, for a session, waits for the next message.
func AgentRun(ctx workflow.Context, in RunInput) (RunResult, error) {
	return agentRun(ctx, in, nil)
}

func agentRun(ctx workflow.Context, in RunInput, obs *Observer) (RunResult, error) {
	r, err := newRun(ctx, in)
	if err == nil && obs != nil {
		r.obs = obs
		obs.started(r)
	}
	if err != nil {
		return RunResult{}, temporal.NewNonRetryableApplicationError(err.Error(), RefusedInput, nil)
	}
	// Handlers first, so queries and updates work from the first workflow task.
	if err := r.registerHandlers(ctx); err != nil {
		return RunResult{}, fmt.Errorf("registering handlers: %w", err)
	}
	if err := r.configure(ctx); err != nil {
		return RunResult{}, temporal.NewNonRetryableApplicationError(err.Error(), RefusedInput, nil)
	}
	r.publish(ctx)
	if r.in.Planner.Kind == plan.KindExternal {
		return r.externalLoop(ctx)
	}
	return r.loop(ctx)
}

// newRun validates the input and builds the run's state: fresh, or the state
// carried over by continue-as-new.
func newRun(ctx workflow.Context, in RunInput) (*run, error) {
	// Runs started under older rules keep them, so their histories replay
	// unchanged; a run of a retired version is refused before anything else,
	// so nothing this build checks can end it (versions.go).
	version := workflow.GetVersion(ctx, versionChangeID, workflow.DefaultVersion, versionCurrent)
	retiredRun(ctx, version)
	in = withDefaults(in)
	if in.Fork != nil {
		// A fork's settings are its source's: checked when it reads them
		// (and a carry given at its start is refused below).
	} else if err := in.checkPolicy(); err != nil {
		return nil, err
	}
	r := &run{in: in, workflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, policy: in.Approval, now: func() time.Time { return workflow.Now(ctx) },
		logger: workflow.GetLogger(ctx), metrics: workflow.GetMetricsHandler(ctx), version: version,
		claimState: claimState{claiming: map[string]bool{}}, guardState: guardState{held: map[string]bool{}}}
	c := in.Carry
	if in.invalid != nil {
		return nil, errors.New(clip(in.invalid.Error(), MaxTextBytes))
	}
	if cron := workflow.GetInfo(ctx).CronSchedule; cron != "" {
		return nil, fmt.Errorf("cron schedule %q refused: each cron run of a workflow id would start with the input — and the idempotency keys — "+
			"of the run before it; start runs on a schedule with a Temporal Schedule (temporal schedule create), which starts each run fresh", clip(cron, MaxNameBytes))
	}
	if c != nil && workflow.GetInfo(ctx).ContinuedExecutionRunID == "" {
		return nil, errors.New("carry refused: only a run that continues as new may hand state to the next run " +
			"(it would set the run's tools, policy switches, memo, trace and counters); start the run without it")
	}
	r.in.MemoBytes, r.in.MemoEntries = min(in.MemoBytes, MaxMemoBytes), min(in.MemoEntries, MaxMemoEntries)
	r.in.HistoryLimit = min(in.HistoryLimit, MaxHistoryLimit)
	in = r.in
	if c == nil {
		c = &Carry{Turn: 1, Transcript: []plan.Entry{{Role: plan.RoleUser, Text: in.Goal}}}
	}
	r.restore(*c)
	r.resumed = r.restoreParked()
	r.firstLength = workflow.GetInfo(ctx).GetCurrentHistoryLength()
	return r, nil
}

// configure loads the worker's declared tools — from the carried state after
// continue-as-new, else through the config local activity, whose result the
// history keeps (a later change on the worker never changes what this run is
// held to) — and checks the input against them.
func (r *run) configure(ctx workflow.Context) error {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
	if r.in.Carry == nil {
		if err := workflow.ExecuteLocalActivity(lctx, ConfigActivity).Get(lctx, &r.Config); err != nil {
			return fmt.Errorf("loading the worker's tools: %w", err)
		}
		if r.in.Fork != nil {
			if err := r.fork(ctx); err != nil {
				return err
			}
		}
	} else if err := r.checkChain(lctx); err != nil {
		return err
	}
	if r.policy == PolicyAlwaysApprove && !r.Config.AllowAutoApprove {
		return fmt.Errorf("approval %q refused: this worker was not started allowing it (start it with --allow-auto-approve)", PolicyAlwaysApprove)
	}
	if kind := r.in.Planner.Kind; kind != plan.KindScripted && kind != plan.KindExternal && !contains(r.Config.Planners, kind) {
		return fmt.Errorf("planner %q is not available on this worker (it has %v)", kind, r.Config.Planners)
	}
	r.specs = map[string]tool.Spec{}
	for _, s := range r.Config.Tools {
		r.specs[s.Name] = s
	}
	r.tools = newValidator(r.specs)
	if err := r.configurePolicy(ctx); err != nil {
		return err
	}
	r.ready = true
	return nil
}

func withDefaults(in RunInput) RunInput {
	if in.Approval == "" {
		in.Approval = PolicyHuman
	}
	if in.ApprovalTimeout <= 0 {
		in.ApprovalTimeout = Duration(DefaultApprovalTimeout)
	}
	if in.IdleTimeout <= 0 {
		in.IdleTimeout = Duration(DefaultIdleTimeout)
	}
	if in.MaxTurns <= 0 {
		in.MaxTurns = DefaultMaxTurns
	}
	if in.MemoEntries <= 0 {
		in.MemoEntries = DefaultMemoEntries
	}
	if in.MemoBytes <= 0 {
		in.MemoBytes = DefaultMemoBytes
	}
	if in.HistoryLimit <= 0 {
		in.HistoryLimit = DefaultHistoryLimit
	}
	return in
}

// loop is the agent loop: plan a step, execute its calls, feed back the
// outcomes; between steps, continue as new when the history grows long.
func (r *run) loop(ctx workflow.Context) (RunResult, error) {
	if len(r.resumed) > 0 { // calls were waiting when the previous run continued as new
		calls, outs := r.resumeStep(ctx)
		if ctx.Err() != nil {
			return RunResult{}, ctx.Err()
		}
		if res, err, end := r.endStep(ctx, calls, outs); end {
			return res, err
		}
	}
	for {
		if r.AwaitingInput {
			if !r.waitForInput(ctx) {
				if ctx.Err() != nil {
					return RunResult{}, ctx.Err()
				}
				return r.finish(ctx, StatusCompleted)
			}
		}
		if r.continueAsNewDue(ctx) {
			return RunResult{}, r.continueAsNew(ctx)
		}
		if r.TurnSteps >= r.in.MaxTurns {
			r.errText = fmt.Sprintf("the planner gave no answer within max_turns (%d steps) of turn %d", r.in.MaxTurns, r.Turn)
			return r.finish(ctx, StatusFailed)
		}
		r.observeStep(ctx)
		decision, err := r.nextStep(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return RunResult{}, ctx.Err()
			}
			r.errText = "planner: " + errorText(err)
			return r.finish(ctx, StatusFailed)
		}
		r.Steps++
		r.TurnSteps++
		r.progress++
		if len(decision.Calls) == 0 {
			r.Answer = clip(decision.Answer, MaxValueBytes)
			r.addTranscript(plan.Entry{Role: plan.RoleAssistant, Text: decision.Answer})
			if !r.in.Session {
				return r.finish(ctx, StatusCompleted)
			}
			r.AwaitingInput, r.IdleSince = true, r.now()
			r.publish(ctx)
			continue
		}
		calls := r.accept(decision.Calls)
		outs := r.executeAll(ctx, calls)
		if ctx.Err() != nil {
			return RunResult{}, ctx.Err()
		}
		if res, err, end := r.endStep(ctx, calls, outs); end {
			return res, err
		}
	}
}

// plan asks the planner for the next step: the scripted planner in place, the
// others as activities (so their answers are in the history and replay never
// asks again).
func (r *run) plan(ctx workflow.Context) (plan.Decision, error) {
	cfg := r.in.Planner
	if cfg.Kind == plan.KindScripted {
		d := plan.Scripted(cfg, r.Steps)
		if len(d.Calls) == 0 && r.version >= versionScriptedAnswer {
			d.Answer = plan.ScriptedAnswer(cfg, r.Transcript) // says what did not run, never the script's claim
		}
		return d, nil
	}
	req := plan.Request{Goal: r.in.Goal, Transcript: recent(r.Transcript, TranscriptKeep, TranscriptBytes), Tools: r.toolInfos(), Step: r.Steps, Config: cfg}
	var d plan.Decision
	var err error
	if cfg.Kind == plan.KindSupport {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: 10 * time.Second,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
		})
		err = workflow.ExecuteLocalActivity(lctx, plan.ActivityName(cfg.Kind), req).Get(lctx, &d)
		r.localSince++
	} else {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			ActivityID:          fmt.Sprintf("plan-%d", r.Steps+1),
			StartToCloseTimeout: 2 * time.Minute,
			RetryPolicy: &temporal.RetryPolicy{
				InitialInterval:        2 * time.Second,
				BackoffCoefficient:     2,
				MaximumInterval:        time.Minute,
				MaximumAttempts:        6,
				NonRetryableErrorTypes: []string{plan.ErrTypeRejected, plan.ErrTypeMisconfigured},
			},
		})
		err = workflow.ExecuteActivity(actx, plan.ActivityName(cfg.Kind), req).Get(actx, &d)
	}
	return d, err
}

// addTranscript appends an entry, bounded (clipEntry). The transcript in
// memory is cut back, in chunks, to what a planner is shown.
func (r *run) addTranscript(e plan.Entry) {
	r.Transcript = append(r.Transcript, clipEntry(e))
	if len(r.Transcript) > 4*TranscriptKeep {
		r.Transcript = recent(r.Transcript, TranscriptKeep, TranscriptBytes)
	}
}

func (r *run) toolInfos() []plan.ToolInfo {
	infos := make([]plan.ToolInfo, 0, len(r.Config.Tools))
	for _, s := range r.Config.Tools {
		infos = append(infos, plan.ToolInfo{Name: s.Name, Description: s.Description, Schema: s.Schema, Destructive: s.Destructive})
	}
	return infos
}

// record appends one event to the trace, bounded (clipRecord, appendTrace),
// and counts it: toolgate_<status>, and toolgate_retry for the extra
// attempts a call took. The SDK's metrics handler emits nothing on replay.
func (r *run) record(c tool.Call, rec TraceRecord) {
	m := r.metrics.WithTags(map[string]string{"tool": c.Tool})
	m.Counter(MetricPrefix + rec.Status).Inc(1)
	if rec.Attempts > 1 {
		m.Counter(MetricPrefix + "retry").Inc(int64(rec.Attempts - 1))
	}
	r.TraceSeq++
	rec.Seq, rec.Turn, rec.CallID, rec.Tool, rec.Args, rec.At = r.TraceSeq, r.Turn, c.ID, c.Tool, c.Args, r.now()
	r.appendTrace(clipRecord(rec))
}

// waitForInput waits (status waiting_for_input) for the next message, the end
// signal, the idle timeout, or a reason to continue as new. It reports whether
// a new turn starts.
func (r *run) waitForInput(ctx workflow.Context) bool {
	idle := time.Duration(r.in.IdleTimeout) - r.now().Sub(r.IdleSince)
	if len(r.Messages) == 0 && !r.Ended && idle > 0 {
		_, _ = workflow.AwaitWithTimeout(ctx, idle, func() bool {
			return len(r.Messages) > 0 || r.Ended || r.continueAsNewDue(ctx)
		})
	}
	if len(r.Messages) == 0 {
		// Ended, idle, cancelled — or due to continue as new, which the loop
		// does next; the new run waits again.
		return r.continueAsNewDue(ctx) && ctx.Err() == nil
	}
	text := r.Messages[0]
	r.Messages = r.Messages[1:]
	r.progress++
	r.Turn++
	r.TurnSteps = 0
	r.AwaitingInput = false
	r.addTranscript(plan.Entry{Role: plan.RoleUser, Text: text})
	r.publish(ctx)
	return true
}

// finish ends the run with a terminal status.
func (r *run) finish(ctx workflow.Context, status string) (RunResult, error) {
	r.done = status
	r.AwaitingInput = false
	r.publish(ctx)
	r.notifyEnd(ctx, status)
	r.drainNotices(ctx)
	// A handler may be waiting for its claim on the server (spent.go): a
	// grant or revoke accepted is applied before the run ends, and the
	// result holds it.
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	return RunResult{Status: status, Answer: r.Answer, Error: r.errText, BlockedOn: r.blockedOn, Trace: r.Trace}, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
