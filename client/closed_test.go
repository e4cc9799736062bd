package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolgate/toolgate/workflows"
)

// closedRuns is a Temporal client whose runs refuse updates and signals with
// NotFound, as the server does for a run that has closed and for one that
// does not exist; Describe knows the runs of status (the others do not exist).
type closedRuns struct {
	sdkclient.Client // only UpdateWorkflow, SignalWorkflow and DescribeWorkflowExecution are called
	status           map[string]enumspb.WorkflowExecutionStatus
	closedAt         time.Time
}

func (f *closedRuns) UpdateWorkflow(context.Context, sdkclient.UpdateWorkflowOptions) (sdkclient.WorkflowUpdateHandle, error) {
	return nil, serviceerror.NewNotFound("workflow execution already completed")
}

func (f *closedRuns) SignalWorkflow(context.Context, string, string, string, any) error {
	return serviceerror.NewNotFound("workflow execution already completed")
}

func (f *closedRuns) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	st, ok := f.status[id]
	if !ok {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + id)
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: st, CloseTime: timestamppb.New(f.closedAt)}}, nil
}

// A decision or a message for a run that has closed says how and when it
// closed (ErrRunClosed, not ErrUnknownRun); one for a run that does not
// exist says there is none.
func TestDecisionForAClosedRunSaysItClosed(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f := &closedRuns{closedAt: at, status: map[string]enumspb.WorkflowExecutionStatus{
		"done":     enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
		"broke":    enumspb.WORKFLOW_EXECUTION_STATUS_FAILED,
		"killed":   enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED,
		"stopped":  enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED,
		"late":     enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT,
		"carried":  enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW,
		"ticket-0": enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
	}}
	c := New(f)
	ctx := context.Background()
	for id, how := range map[string]string{"done": "has completed", "broke": "has failed", "killed": "was terminated",
		"stopped": "was cancelled", "late": "timed out", "carried": "continued as new"} {
		_, err := c.Decide(ctx, id, true, decisionFor("c-3"))
		require.Error(t, err)
		assert.True(t, errors.Is(err, ErrRunClosed), "%s: %v", id, err)
		assert.False(t, errors.Is(err, ErrUnknownRun), "%s: %v", id, err)
		assert.Equal(t, "run "+id+" "+how+" (closed at 2026-01-02T03:04:05Z): it takes no more decisions", err.Error())
	}
	err := c.Message(ctx, "ticket-0", "hello")
	assert.True(t, errors.Is(err, ErrRunClosed), "%v", err)
	assert.Equal(t, "run ticket-0 has completed (closed at 2026-01-02T03:04:05Z): it takes no more messages", err.Error())

	_, err = c.Decide(ctx, "ticket-42", false, decisionFor("c-3"))
	assert.True(t, errors.Is(err, ErrUnknownRun), "%v", err)
	assert.False(t, errors.Is(err, ErrRunClosed), "%v", err)
	assert.Equal(t, "no run with id ticket-42 in this namespace", err.Error())
}

func decisionFor(callID string) workflows.DecisionInput {
	return workflows.DecisionInput{CallID: callID, Approver: "alice", ArgsDigest: "d"}
}
