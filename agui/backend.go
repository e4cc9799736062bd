package agui

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/workflows"
)

// DoorMemo is the memo field a run started by this endpoint carries, with
// the value Door: the handler refuses a thread whose run lacks it.
const (
	DoorMemo = "toolgate_door"
	Door     = "agui"
)

// Backend is what the handler needs of toolgate's client. NewBackend
// (a *client.Client) implements it; tests use a fake.
type Backend interface {
	// Describe says whether run id is running and which door started it;
	// an error wrapping client.ErrUnknownRun if there is no such run.
	Describe(ctx context.Context, id string) (RunInfo, error)
	// Start starts run id with the memo {DoorMemo: Door}.
	Start(ctx context.Context, id string, in workflows.RunInput) error
	// Message sends a session run its next user message.
	Message(ctx context.Context, id, text string) error
	State(ctx context.Context, id string) (workflows.State, error)
	Trace(ctx context.Context, id string) ([]workflows.TraceRecord, error)
	// Decide sends an approve (approve true) or reject update.
	Decide(ctx context.Context, id string, approve bool, in workflows.DecisionInput, opts ...client.DecideOption) (workflows.DecisionResult, error)
	// Respond sends a respond update (in.Response answers in the tool's place).
	Respond(ctx context.Context, id string, in workflows.DecisionInput, opts ...client.DecideOption) (workflows.DecisionResult, error)
}

// RunInfo is what Describe tells of a run.
type RunInfo struct {
	Running bool
	// Door is the run's memo toolgate_door ("" if none, or if the run is
	// not an AgentRun).
	Door string
	// Failure is why a closed run failed, if it did ("" for one that
	// runs, completed, or whose failure could not be read).
	Failure string
}

// BackendOption configures NewBackend.
type BackendOption func(*backend)

// WithDataConverter is the data converter the Temporal client encodes
// payloads with (connect.Conn.Options.DataConverter: with an encryption key
// file, memos are encrypted too); Describe decodes the door memo with it.
// Default: the SDK's.
func WithDataConverter(dc converter.DataConverter) BackendOption {
	return func(b *backend) {
		if dc != nil {
			b.dc = dc
		}
	}
}

// NewBackend is the Backend over c: runs are started on c's task queue.
func NewBackend(c *client.Client, opts ...BackendOption) Backend {
	b := &backend{c: c, dc: converter.GetDefaultDataConverter()}
	for _, o := range opts {
		o(b)
	}
	return b
}

type backend struct {
	c  *client.Client
	dc converter.DataConverter
}

func (b *backend) Describe(ctx context.Context, id string) (RunInfo, error) {
	desc, err := b.c.Temporal().DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return RunInfo{}, fmt.Errorf("%w: no run with id %s in this namespace", client.ErrUnknownRun, id)
		}
		return RunInfo{}, fmt.Errorf("describing run %s: %w", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	ri := RunInfo{Running: info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
	if info.GetType().GetName() != workflows.WorkflowName {
		return ri, nil
	}
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
		if _, err := b.c.Result(ctx, id); err != nil {
			ri.Failure = text.Clip(err.Error(), 1000)
		}
	}
	if p := info.GetMemo().GetFields()[DoorMemo]; p != nil {
		var door string
		if err := b.dc.FromPayload(p, &door); err == nil {
			ri.Door = text.Clip(door, 64)
		}
	}
	return ri, nil
}

func (b *backend) Start(ctx context.Context, id string, in workflows.RunInput) error {
	_, err := b.c.Start(ctx, id, in, client.WithTemporalOptions(func(o *sdkclient.StartWorkflowOptions) {
		o.Memo = map[string]any{DoorMemo: Door}
	}))
	return err
}

func (b *backend) Message(ctx context.Context, id, text string) error {
	return b.c.Message(ctx, id, text)
}

func (b *backend) State(ctx context.Context, id string) (workflows.State, error) {
	return b.c.State(ctx, id)
}

func (b *backend) Trace(ctx context.Context, id string) ([]workflows.TraceRecord, error) {
	return b.c.Trace(ctx, id)
}

func (b *backend) Decide(ctx context.Context, id string, approve bool, in workflows.DecisionInput, opts ...client.DecideOption) (workflows.DecisionResult, error) {
	return b.c.Decide(ctx, id, approve, in, opts...)
}

func (b *backend) Respond(ctx context.Context, id string, in workflows.DecisionInput, opts ...client.DecideOption) (workflows.DecisionResult, error) {
	return b.c.Respond(ctx, id, in, opts...)
}
