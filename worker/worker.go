// Package worker builds a toolgate worker: it registers the AgentRun workflow,
// the declared tools (each an activity named after the tool), the planners
// and the config activity that records the tools in every run's history.
package worker

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/authority"
	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/permit"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/timeline"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// Registry is the part of a Temporal worker (or test environment) that
// registrations need.
type Registry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// PlanFunc is a planner activity.
type PlanFunc func(ctx context.Context, req plan.Request) (plan.Decision, error)

// Options say what a worker offers.
type Options struct {
	// Tools are the declared tools. Their flags (destructive, fallback,
	// invalidates …) are set here and nowhere else.
	Tools []tool.Tool
	// Planners by kind (plan.KindSupport, plan.KindOpenAI); the scripted
	// planner needs no activity.
	Planners map[string]PlanFunc
	// AllowAutoApprove lets clients start runs with approval always_approve.
	AllowAutoApprove bool
	// SearchAttributes: the namespace has ToolgateStatus and
	// ToolgatePendingTools, and runs keep them current.
	SearchAttributes bool
	// Policy is who may decide and by which rule (package policy; load it
	// with policy.Load). With one, every decision must be signed by an
	// approver it declares; without one, approvals are unauthenticated.
	// Runs are held to the policy of the worker they started on.
	Policy *policy.Policy
	// Interceptors are the worker interceptors Start gives the worker, e.g.
	// tracing.Interceptors: the SDK's OpenTelemetry interceptor and
	// toolgate's step spans. They are not part of what runs are held to; a
	// worker you make yourself and Register on takes them in its own
	// options (the SDK's worker.Options.Interceptors).
	Interceptors []interceptor.WorkerInterceptor
	// DataConverter and FailureConverter are those the worker's client
	// writes payloads and failures with (nil: the SDK's defaults): the fork
	// activity decodes the source run's history with them.
	DataConverter    converter.DataConverter
	FailureConverter converter.FailureConverter
	// Notify tells people of waiting calls, decisions and runs' ends
	// (notify.NewSender over a --notify file); nil: nobody is told.
	Notify Notifier
	// LedgerUpdatesPerRun is how many updates the fleet ledger (package
	// ledger) takes before it continues as new; 0: ledger.UpdatesPerRun.
	LedgerUpdatesPerRun int
	// Ledger, when set, answers the runs' reservations in the fleet
	// ledger's place (a ledger.Memory in unit tests); nil: the ledger
	// workflow of the task queue.
	Ledger ledger.Backend
	// WorkerKey signs the permit each tool activity checks before it runs
	// (package permit): every worker of a task queue, and every worker
	// hosting its tools, must hold it (toolgate keys worker FILE, then
	// signed.ReadPrivateKey). nil: a key made for this process, so only
	// this worker's own activities accept its permits.
	WorkerKey ed25519.PrivateKey
	// TrustedWorkerKeys are further worker keys whose permits this worker's
	// tools accept (a key being rotated out).
	TrustedWorkerKeys []ed25519.PublicKey
	// PermitClaimer records each destructive call's permit use once; nil:
	// on the Temporal server (permit.TemporalClaimer, in the authority
	// namespace when there is one). Unit tests without a server use
	// permit.NewMemoryClaimer.
	PermitClaimer permit.Claimer
	// Authority is the worker's client of the authority namespace (package
	// authority), where every use is claimed and the fleet ledger lives:
	// only workers write it, so no client of the runs can give a token
	// back, squat a claim, or wipe a budget or a pause. Start runs the
	// ledger on a second worker there (RegisterAuthority). nil: all of it
	// lives in the runs' namespace, where any client of the runs may
	// delete, start, terminate or signal it (docs/threat-model.md).
	Authority *authority.Conn
}

// Notifier is what a worker notifies through: the targets it declares to its
// runs, and the notify activity that delivers to one (notify.Sender). Deliver
// runs as an activity with a heartbeat timeout of workflows.NotifyHeartbeat:
// it must heartbeat more often (notify.Sender does, every third of it, with
// the links it has sent as details).
type Notifier interface {
	Targets() []workflows.NotifyTarget
	Deliver(ctx context.Context, n workflows.Notification) (workflows.Delivery, error)
}

// Config is what runs started on this worker are held to.
func (o Options) Config() workflows.WorkerConfig {
	cfg := workflows.WorkerConfig{AllowAutoApprove: o.AllowAutoApprove, SearchAttributes: o.SearchAttributes, Policy: o.Policy}
	if o.Notify != nil {
		cfg.Notify = o.Notify.Targets()
	}
	for _, t := range o.Tools {
		cfg.Tools = append(cfg.Tools, t.Spec)
	}
	for kind := range o.Planners {
		cfg.Planners = append(cfg.Planners, kind)
	}
	slices.Sort(cfg.Planners)
	return cfg
}

// MaxConfigBytes bounds the config every run records at its start (Config,
// as JSON): well under Temporal's payload limit (2 MiB by default) and under
// what a run carries at continue-as-new, so that no declaration can make the
// runs on a worker fail their first workflow task.
const MaxConfigBytes = 512 << 10

// Validate checks the declarations: valid specs, descriptions and schemas
// within their bounds, argument schemas that compile without reading disk or
// network (tool.Tool.Validate: a $ref outside the schema's own document is
// refused), unique names, fallbacks and invalidations that name registered
// tools, and a recorded config within MaxConfigBytes.
func (o Options) Validate() error {
	names := map[string]bool{}
	var errs []error
	for _, t := range o.Tools {
		if err := t.Validate(); err != nil {
			errs = append(errs, err)
		}
		if names[t.Spec.Name] {
			errs = append(errs, fmt.Errorf("tool %s is registered twice", t.Spec.Name))
		}
		switch {
		case t.Run == nil && !t.Spec.Remote():
			errs = append(errs, fmt.Errorf("tool %s has no implementation (and no task_queue: no other worker hosts it)", t.Spec.Name))
		case t.Run != nil && t.Spec.Remote():
			errs = append(errs, fmt.Errorf("tool %s has an implementation here and a task_queue (%s): one worker hosts a tool", t.Spec.Name, t.Spec.TaskQueue))
		}
		names[t.Spec.Name] = true
	}
	for _, t := range o.Tools {
		if f := t.Spec.Fallback; f != "" && !names[f] {
			errs = append(errs, fmt.Errorf("tool %s: fallback %s is not registered", t.Spec.Name, f))
		}
		for _, inv := range t.Spec.Invalidates {
			if !names[inv] {
				errs = append(errs, fmt.Errorf("tool %s: invalidates %s, which is not registered", t.Spec.Name, inv))
			}
		}
	}
	if o.Policy != nil {
		if err := o.checkPolicy(names); err != nil {
			errs = append(errs, err)
		}
	}
	for kind, fn := range o.Planners {
		if kind == plan.KindScripted || fn == nil {
			errs = append(errs, fmt.Errorf("planner %q: the scripted planner needs no activity, and a planner needs a function", kind))
		}
	}
	if err := o.checkConfigSize(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkConfigSize refuses a config over MaxConfigBytes, naming the largest
// tools (and the policy's share).
func (o Options) checkConfigSize() error {
	raw, err := json.Marshal(o.Config())
	if err != nil {
		return fmt.Errorf("encoding the config runs record: %w", err)
	}
	if len(raw) <= MaxConfigBytes {
		return nil
	}
	type sized struct {
		name  string
		bytes int
	}
	var tools []sized
	for _, t := range o.Tools {
		b, _ := json.Marshal(t.Spec)
		tools = append(tools, sized{t.Spec.Name, len(b)})
	}
	slices.SortStableFunc(tools, func(a, b sized) int { return b.bytes - a.bytes })
	var largest []string
	for _, t := range tools[:min(len(tools), 5)] {
		largest = append(largest, fmt.Sprintf("%s (%d bytes)", t.name, t.bytes))
	}
	msg := fmt.Sprintf("the config every run records (its tools' specs and the policy) is %d bytes, more than %d (worker.MaxConfigBytes); the largest tools: %s",
		len(raw), MaxConfigBytes, strings.Join(largest, ", "))
	if o.Policy != nil {
		b, _ := json.Marshal(o.Policy)
		msg += fmt.Sprintf("; the policy: %d bytes", len(b))
	}
	return errors.New(msg)
}

// checkPolicy makes sure the policy compiles, names only registered tools,
// and does not meet always_approve (a policy decides who approves).
func (o Options) checkPolicy(names map[string]bool) error {
	if o.AllowAutoApprove {
		return errors.New("policy: a worker with a policy does not take always_approve runs (drop --allow-auto-approve)")
	}
	registered := make([]string, 0, len(names))
	for n := range names {
		registered = append(registered, n)
	}
	slices.Sort(registered)
	if err := o.Policy.CheckTools(registered); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	if _, err := policy.Compile(o.Policy); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	return nil
}

// describeChain is the chain activity: it asks the server which workflow type
// and task queue the run a continued run came from had.
func describeChain(ctx context.Context, req workflows.ChainRequest) (workflows.ChainInfo, error) {
	c := activity.GetClient(ctx)
	if c == nil {
		return workflows.ChainInfo{}, errors.New("no Temporal client in this activity's context")
	}
	resp, err := c.DescribeWorkflowExecution(ctx, req.WorkflowID, req.RunID)
	if err != nil {
		return workflows.ChainInfo{}, fmt.Errorf("describing run %s of %s: %w", req.RunID, req.WorkflowID, err)
	}
	info := resp.GetWorkflowExecutionInfo()
	return workflows.ChainInfo{WorkflowType: info.GetType().GetName(), TaskQueue: info.GetTaskQueue(), Status: info.GetStatus().String()}, nil
}

// readFork is the fork activity: it reads the source run's history from the
// server and replays it to the fork's point. A source it cannot fork is a
// refusal (not retried); a server it cannot reach is retried.
func readFork(ctx context.Context, src workflows.ForkSource, read timeline.Options) (workflows.ForkState, error) {
	c := activity.GetClient(ctx)
	if c == nil {
		return workflows.ForkState{}, errors.New("no Temporal client in this activity's context")
	}
	st, err := timeline.ForkState(ctx, c, src, read)
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return st, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no run %s: %v", src.WorkflowID, err), workflows.RefusedInput, nil)
	case err != nil && ctx.Err() == nil && !isTransient(err):
		return st, temporal.NewNonRetryableApplicationError(err.Error(), workflows.RefusedInput, nil)
	}
	return st, err
}

// isTransient tells a server that could not answer from a refusal.
func isTransient(err error) bool {
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	var exhausted *serviceerror.ResourceExhausted
	return errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.As(err, &exhausted) || errors.Is(err, context.DeadlineExceeded)
}

// Register registers AgentRun, the config activity, every tool (its activity
// bounded by tool.Bounded) and every planner on r.
func Register(r Registry, o Options) error {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("toolgate worker: %w", err)
	}
	cfg := o.Config()
	permits, err := newPermits(o, cfg)
	if err != nil {
		return fmt.Errorf("toolgate worker: %w", err)
	}
	r.RegisterWorkflowWithOptions(workflows.AgentRun, workflow.RegisterOptions{Name: workflows.WorkflowName})
	r.RegisterWorkflowWithOptions(workflows.StartMarker, workflow.RegisterOptions{Name: workflows.StartMarkerWorkflow})
	r.RegisterActivityWithOptions(claimer{conn: o.Authority}.claim, activity.RegisterOptions{Name: workflows.ClaimActivity})
	r.RegisterActivityWithOptions(links{conn: o.Authority}.check, activity.RegisterOptions{Name: workflows.LinksActivity})
	r.RegisterActivityWithOptions(func(context.Context) (workflows.WorkerConfig, error) { return cfg, nil },
		activity.RegisterOptions{Name: workflows.ConfigActivity})
	r.RegisterActivityWithOptions(permits.sign, activity.RegisterOptions{Name: workflows.PermitActivity})
	r.RegisterActivityWithOptions(describeChain, activity.RegisterOptions{Name: workflows.ChainActivity})
	r.RegisterActivityWithOptions(resets{conn: o.Authority}.read, activity.RegisterOptions{Name: workflows.ResetActivity})
	r.RegisterWorkflowWithOptions(workflows.Rewind, workflow.RegisterOptions{Name: workflows.RewindWorkflow})
	r.RegisterActivityWithOptions(rewinder{conn: o.Authority}.rewind, activity.RegisterOptions{Name: workflows.RewindActivity})
	read := timeline.Options{DataConverter: o.DataConverter, FailureConverter: o.FailureConverter}
	r.RegisterActivityWithOptions(func(ctx context.Context, src workflows.ForkSource) (workflows.ForkState, error) {
		return readFork(ctx, src, read)
	}, activity.RegisterOptions{Name: workflows.ForkActivity})
	// The fleet ledger of the task queue: its workflow, and the activities
	// runs reserve and settle their calls with.
	lcfg := ledger.Config{Policy: o.Policy, UpdatesPerRun: o.LedgerUpdatesPerRun, Backend: o.Ledger, Tools: []string{}}
	for _, t := range o.Tools {
		lcfg.Tools = append(lcfg.Tools, t.Spec.Name)
	}
	if o.Authority != nil {
		lcfg.Client = o.Authority.Client
		ledger.RegisterCalls(r, lcfg) // the ledger itself runs in the authority namespace (RegisterAuthority)
	} else {
		ledger.Register(r, lcfg)
	}
	if o.Notify != nil {
		r.RegisterActivityWithOptions(deliverWith(o.Authority, o.Notify.Deliver), activity.RegisterOptions{Name: workflows.NotifyActivity})
	}
	for _, t := range o.Tools {
		if t.Spec.Remote() {
			continue // hosted by the worker of its task queue
		}
		// Whatever the tool returns, the activity reports a result within
		// tool.MaxResultBytes (the marker beyond) and a failure within
		// tool.MaxErrorBytes, local activity or not: nothing a tool returns
		// can push a workflow task or a history event past the payload limit.
		// And it runs only for a call a gate let through: its permit is
		// checked before the tool sees the request.
		r.RegisterActivityWithOptions(permits.guard(tool.Bounded(t.Run)), activity.RegisterOptions{Name: t.Spec.Name})
	}
	for kind, fn := range o.Planners {
		r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: plan.ActivityName(kind)})
	}
	return nil
}
