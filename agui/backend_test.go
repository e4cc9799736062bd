package agui

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/encryption"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/workflows"
)

// temporalStub is the two calls of a Temporal client NewBackend's Start and
// Describe make (any other panics).
type temporalStub struct {
	sdkclient.Client
	started *sdkclient.StartWorkflowOptions
	desc    *workflowservice.DescribeWorkflowExecutionResponse
	descErr error
}

func (s *temporalStub) ExecuteWorkflow(_ context.Context, o sdkclient.StartWorkflowOptions, _ any, _ ...any) (sdkclient.WorkflowRun, error) {
	s.started = &o
	return nil, nil
}

func (s *temporalStub) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return s.desc, s.descErr
}

func described(t *testing.T, dc converter.DataConverter, typ string, door any) *workflowservice.DescribeWorkflowExecutionResponse {
	t.Helper()
	info := &workflowpb.WorkflowExecutionInfo{Type: &commonpb.WorkflowType{Name: typ}, Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
	if door != nil {
		p, err := dc.ToPayload(door)
		if err != nil {
			t.Fatal(err)
		}
		info.Memo = &commonpb.Memo{Fields: map[string]*commonpb.Payload{DoorMemo: p}}
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: info}
}

func TestBackendStartsRunsMarkedAsTheDoorsAndReadsTheMark(t *testing.T) {
	stub := &temporalStub{}
	b := NewBackend(client.New(stub))
	in := workflows.RunInput{Goal: goal, Planner: plan.Config{Kind: plan.KindSupport}, Session: true}
	if err := b.Start(context.Background(), "agui-t1", in); err != nil {
		t.Fatal(err)
	}
	if stub.started == nil || stub.started.ID != "agui-t1" || stub.started.Memo[DoorMemo] != Door {
		t.Fatalf("started with %+v", stub.started)
	}

	keyFile := filepath.Join(t.TempDir(), "enc.key")
	if _, _, err := encryption.AddKey(keyFile); err != nil {
		t.Fatal(err)
	}
	k, err := encryption.LoadKeyring(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	plain := converter.GetDefaultDataConverter()
	for _, c := range []struct {
		name       string
		encodeWith converter.DataConverter
		decodeWith BackendOption
		typ        string
		door       any
		want       string
	}{
		{"plain memo", plain, nil, workflows.WorkflowName, Door, Door},
		{"encrypted memo, the client's converter", k.DataConverter(), WithDataConverter(k.DataConverter()), workflows.WorkflowName, Door, Door},
		{"encrypted memo, no key", k.DataConverter(), nil, workflows.WorkflowName, Door, ""},
		{"another door", plain, nil, workflows.WorkflowName, "mcp", "mcp"},
		{"no memo", plain, nil, workflows.WorkflowName, nil, ""},
		{"not an AgentRun", plain, nil, "Other", Door, ""},
		{"not a string", plain, nil, workflows.WorkflowName, 42, ""},
	} {
		stub := &temporalStub{desc: described(t, c.encodeWith, c.typ, c.door)}
		var opts []BackendOption
		if c.decodeWith != nil {
			opts = append(opts, c.decodeWith)
		}
		info, err := NewBackend(client.New(stub), opts...).Describe(context.Background(), "agui-t1")
		if err != nil || info.Door != c.want || !info.Running {
			t.Errorf("%s: %+v, %v; want door %q", c.name, info, err, c.want)
		}
	}
	stub = &temporalStub{descErr: serviceerror.NewNotFound("no such workflow")}
	if _, err := NewBackend(client.New(stub)).Describe(context.Background(), "agui-t1"); !errors.Is(err, client.ErrUnknownRun) {
		t.Errorf("a missing run: %v", err)
	}
}
