// Package nexusserve serves toolgate as a Nexus service, so that a workflow
// of any Temporal team, in any language, calls the gate durably: its call
// waits for a human as long as it takes, across restarts of either side,
// and completes with the call's outcome.
//
// The service is named toolgate and has two operations:
//
//   - call proposes one tool call to a session run (an AgentRun whose
//     planner is external, as the MCP door's), started if it is not
//     running, and completes once the call has run, was rejected, expired,
//     or was answered in the tool's place, with the outcome an MCP client
//     gets. Its idempotency key (by default the operation's own request id)
//     makes it exactly once; cancelling the operation while the call waits
//     for a human withdraws the call.
//   - run starts an AgentRun and completes with its result.
//
// Both are asynchronous operations backed by workflows (the SDK's
// temporalnexus): call by a small ToolgateNexusCall workflow that speaks to
// the session run through package client, run by the AgentRun itself. The
// runs a caller reaches are under the "nexus-" prefix: a Nexus caller never
// proposes into a run of another door (an MCP or AG-UI session). Who may
// call is the operator's choice of who may reach the Nexus endpoint.
package nexusserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporalnexus"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// Names of the service, its operations and the workflow behind call.
const (
	ServiceName   = "toolgate"
	OperationCall = "call"
	OperationRun  = "run"
	// CallWorkflow is the workflow type that backs a call operation.
	CallWorkflow = "ToolgateNexusCall"
	// TaskQueue is the default task queue of the worker that hosts the
	// service: the Nexus endpoint's target.
	TaskQueue = "toolgate-nexus"
	// RunPrefix starts the workflow id of every run a Nexus caller reaches.
	RunPrefix = "nexus-"
)

// DefaultIdleTimeout is how long a session run started by a call, without
// a start input of the caller's, waits for the next call before it ends.
const DefaultIdleTimeout = time.Hour

// MaxInputBytes bounds an operation's input.
const MaxInputBytes = 2*workflows.MaxArgsBytes + 64<<10

// CallInput is the input of the call operation.
type CallInput struct {
	// Run names the session run (1 to 64 letters, digits, '.', '_', '-'):
	// its workflow id is RunPrefix + Run.
	Run  string          `json:"run"`
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args,omitempty"`
	// Key is the call's idempotency key: a call with the key of a call the
	// run remembers attaches to it (the same tool and arguments, or it is
	// refused) and never runs twice. Empty: the operation's request id, so
	// a retried start of one operation is one call.
	Key string `json:"key,omitempty"`
	// Start is the session run's input, used only if it is not running: its
	// planner must be external. Under a policy it must be signed (its
	// request_token, `toolgate nexus sign-start`), and a call to a run that
	// is not running is refused without one.
	Start *workflows.RunInput `json:"start,omitempty"`
}

// CallOutput is the outcome of a call operation: the call's trace status
// (ok, cache_hit, responded; rejected, cancelled, expired, blocked, error)
// with its result or why it did not run.
type CallOutput struct {
	Run        string          `json:"run"`
	CallID     string          `json:"call_id"`
	Tool       string          `json:"tool"`
	ArgsDigest string          `json:"args_digest,omitempty"`
	Status     string          `json:"status"`
	Result     json.RawMessage `json:"result,omitempty"`
	// ResultDropped: the run no longer keeps the result (a call attached to
	// long after it ended).
	ResultDropped bool   `json:"result_dropped,omitempty"`
	Error         string `json:"error,omitempty"`
	Note          string `json:"note,omitempty"`
	// Attached: the call was proposed before (its key), and did not run again.
	Attached bool `json:"attached,omitempty"`
}

// OK reports whether the call produced a result: it ran, was answered from
// the memo, or a human answered in the tool's place.
func (o CallOutput) OK() bool {
	switch o.Status {
	case workflows.TraceOK, workflows.TraceCacheHit, workflows.TraceResponded:
		return true
	}
	return false
}

// RunRequest is the input of the run operation.
type RunRequest struct {
	// ID names the run (as CallInput.Run): its workflow id is RunPrefix + ID.
	ID string `json:"id"`
	// Input is the run's input; under a policy, signed.
	Input workflows.RunInput `json:"input"`
}

// Options configure the service.
type Options struct {
	// Runs is the client the service speaks to runs through: its task queue
	// is the one AgentRuns start on.
	Runs *client.Client
	// RunQueue is that task queue (workflows.TaskQueue if empty).
	RunQueue string
	// Policy: the worker the runs start on has an approval policy, so a run
	// is started only with a signed start (its requester is then proven).
	Policy bool
	// IdleTimeout of a session run a call starts without a start input
	// (DefaultIdleTimeout if zero).
	IdleTimeout time.Duration
	// Recheck is how long a call the run will tell of waits between two
	// looks of its own (RecheckEvery if zero).
	Recheck time.Duration
}

func (o Options) runQueue() string {
	if o.RunQueue == "" {
		return workflows.TaskQueue
	}
	return o.RunQueue
}

// runNamePattern is what a run's name may be.
var runNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckRunName says why name is not a name a Nexus caller may give a run
// (CallInput.Run, RunRequest.ID), or nil.
func CheckRunName(name string) error {
	if !runNamePattern.MatchString(name) {
		return fmt.Errorf("run name %.80q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// RunID is the workflow id of the run a Nexus caller names name.
func RunID(name string) string { return RunPrefix + name }

// NewService is the toolgate Nexus service: register it on the worker of the
// endpoint's target task queue, with the call workflow and its activities
// (Register does all three).
func NewService(o Options) (*nexus.Service, error) {
	call, err := temporalnexus.NewWorkflowRunOperationWithOptions(temporalnexus.WorkflowRunOperationOptions[json.RawMessage, CallOutput]{
		Name: OperationCall,
		Handler: func(ctx context.Context, raw json.RawMessage, so nexus.StartOperationOptions) (temporalnexus.WorkflowHandle[CallOutput], error) {
			req, err := o.callRequest(raw, so.RequestID)
			if err != nil {
				return nil, badRequest(err)
			}
			wo := sdkclient.StartWorkflowOptions{ID: req.workflowID(), WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING}
			return temporalnexus.ExecuteUntypedWorkflow[CallOutput](ctx, so, wo, CallWorkflow, req)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("nexus operation %s: %w", OperationCall, err)
	}
	run, err := temporalnexus.NewWorkflowRunOperationWithOptions(temporalnexus.WorkflowRunOperationOptions[json.RawMessage, workflows.RunResult]{
		Name: OperationRun,
		Handler: func(ctx context.Context, raw json.RawMessage, so nexus.StartOperationOptions) (temporalnexus.WorkflowHandle[workflows.RunResult], error) {
			id, in, err := o.runRequest(raw)
			if err != nil {
				return nil, badRequest(err)
			}
			wo := sdkclient.StartWorkflowOptions{ID: id, TaskQueue: o.runQueue()}
			h, err := temporalnexus.ExecuteUntypedWorkflow[workflows.RunResult](ctx, so, wo, workflows.WorkflowName, in)
			var started *serviceerror.WorkflowExecutionAlreadyStarted
			if errors.As(err, &started) { // another operation's run (a retry of this one attaches by its request id)
				return nil, badRequest(fmt.Errorf("id: a run %s is running already; give the run another id", id))
			}
			return h, err
		},
	})
	if err != nil {
		return nil, fmt.Errorf("nexus operation %s: %w", OperationRun, err)
	}
	svc := nexus.NewService(ServiceName)
	if err := svc.Register(call, run); err != nil {
		return nil, fmt.Errorf("nexus service %s: %w", ServiceName, err)
	}
	return svc, nil
}

// badRequest is a refusal of an operation's input: the caller's operation
// fails at once, saying why, and is not retried.
func badRequest(err error) error {
	return nexus.NewHandlerErrorf(nexus.HandlerErrorTypeBadRequest, "toolgate refused the operation's input: %v", err)
}

// decode decodes an operation's input strictly: a field the input does not
// have (a typo) is refused, never skipped.
func decode(raw json.RawMessage, v any) error {
	if len(raw) > MaxInputBytes {
		return fmt.Errorf("%d bytes, at most %d", len(raw), MaxInputBytes)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return errors.New("no input: want a JSON object")
	}
	return tool.DecodeExact(raw, v)
}

// callRequest checks a call operation's input and makes the call workflow's.
func (o Options) callRequest(raw json.RawMessage, requestID string) (CallRequest, error) {
	var in CallInput
	if err := decode(raw, &in); err != nil {
		return CallRequest{}, fmt.Errorf("call (want {\"run\",\"tool\",\"args\",\"key\",\"start\"}): %w", err)
	}
	if err := CheckRunName(in.Run); err != nil {
		return CallRequest{}, err
	}
	p := workflows.Proposal{Tool: in.Tool, Args: in.Args, Key: in.Key}
	switch {
	case in.Tool == "":
		return CallRequest{}, errors.New("tool is empty")
	case len(in.Tool) > workflows.MaxNameBytes:
		return CallRequest{}, fmt.Errorf("a tool's name has at most %d bytes", workflows.MaxNameBytes)
	case len(in.Args) > workflows.MaxArgsBytes:
		return CallRequest{}, fmt.Errorf("the arguments have %d bytes, a call's at most %d", len(in.Args), workflows.MaxArgsBytes)
	case len(in.Key) > workflows.MaxKeyBytes:
		return CallRequest{}, fmt.Errorf("key has %d bytes, at most %d", len(in.Key), workflows.MaxKeyBytes)
	}
	if args := bytes.TrimSpace(p.Args); len(args) == 0 || bytes.Equal(args, []byte("null")) {
		p.Args = json.RawMessage("{}")
	}
	if p.Key == "" {
		if requestID == "" {
			return CallRequest{}, errors.New("no key, and the operation has no request id to take as one")
		}
		p.Key = "nexus:" + requestID
	}
	id := RunID(in.Run)
	start := in.Start
	switch {
	case start == nil && o.Policy:
		// A run that is running takes the call; one that is not is
		// started only signed, so the proposal carries no start, and
		// propose says what to give when the run is not there.
		return CallRequest{Run: id, Proposal: p, NeedsSignedStart: true, Recheck: o.Recheck}, nil
	case start == nil:
		start = &workflows.RunInput{Goal: "Nexus session " + in.Run, Planner: plan.Config{Kind: plan.KindExternal},
			IdleTimeout: workflows.Duration(o.idleTimeout())}
	case start.Planner.Kind != plan.KindExternal:
		return CallRequest{}, fmt.Errorf("start: the planner of a session run is %q, not %q: its calls come from its callers", plan.KindExternal, start.Planner.Kind)
	}
	if err := o.checkStart(*start, "start"); err != nil {
		return CallRequest{}, err
	}
	return CallRequest{Run: id, Proposal: p, Start: start, Recheck: o.Recheck}, nil
}

func (o Options) idleTimeout() time.Duration {
	if o.IdleTimeout <= 0 {
		return DefaultIdleTimeout
	}
	return o.IdleTimeout
}

// runRequest checks a run operation's input: the run's workflow id, and its
// input as the run reads it.
func (o Options) runRequest(raw json.RawMessage) (string, json.RawMessage, error) {
	var in RunRequest
	if err := decode(raw, &in); err != nil {
		return "", nil, fmt.Errorf("run (want {\"id\",\"input\"}): %w", err)
	}
	if err := CheckRunName(in.ID); err != nil {
		return "", nil, fmt.Errorf("id: %w", err)
	}
	if err := o.checkStart(in.Input, "input"); err != nil {
		return "", nil, err
	}
	enc, err := client.CheckInput(in.Input)
	if err != nil {
		return "", nil, fmt.Errorf("input: %w", err)
	}
	return RunID(in.ID), enc, nil
}

// checkStart refuses an input the run would refuse, and an unsigned one
// under a policy.
func (o Options) checkStart(in workflows.RunInput, field string) error {
	if o.Policy && in.RequestToken == "" {
		return fmt.Errorf("%s: the worker has an approval policy, so a run starts only signed by its requester: sign it with `toolgate nexus sign-start` (request_token)", field)
	}
	if _, err := client.CheckInput(in); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}
