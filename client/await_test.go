package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	querypb "go.temporal.io/api/query/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/toolgate/toolgate/workflows"
)

// look is what one state query of a run answers: a state, the query
// rejected because the run is closed with this status, or an error.
type look struct {
	state    workflows.State
	rejected enumspb.WorkflowExecutionStatus
	err      error
}

// lookingRun is a Temporal client's view of one run whose state queries
// answer looks in turn (the last one again and again), and whose result is
// result (or resultErr).
type lookingRun struct {
	sdkclient.Client // only QueryWorkflowWithOptions, GetWorkflow and DescribeWorkflowExecution are called
	looks            []look
	result           workflows.RunResult
	resultErr        error

	mu      sync.Mutex
	queries []*sdkclient.QueryWorkflowWithOptionsRequest
}

func (f *lookingRun) QueryWorkflowWithOptions(_ context.Context, req *sdkclient.QueryWorkflowWithOptionsRequest) (*sdkclient.QueryWorkflowWithOptionsResponse, error) {
	f.mu.Lock()
	f.queries = append(f.queries, req)
	l := f.looks[min(len(f.queries), len(f.looks))-1]
	f.mu.Unlock()
	switch {
	case l.err != nil:
		return nil, l.err
	case l.rejected != enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED:
		return &sdkclient.QueryWorkflowWithOptionsResponse{QueryRejected: &querypb.QueryRejected{Status: l.rejected}}, nil
	}
	p, err := converter.GetDefaultDataConverter().ToPayloads(l.state)
	if err != nil {
		return nil, err
	}
	return &sdkclient.QueryWorkflowWithOptionsResponse{QueryResult: encodedValue{p}}, nil
}

// DescribeWorkflowExecution is asked when a query finds no run: this fake
// knows no other run than its looks, so there is none.
func (f *lookingRun) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return nil, serviceerror.NewNotFound("workflow not found")
}

func (f *lookingRun) GetWorkflow(context.Context, string, string) sdkclient.WorkflowRun {
	return resultRun{f: f}
}

type resultRun struct {
	sdkclient.WorkflowRun
	f *lookingRun
}

func (r resultRun) Get(_ context.Context, out any) error {
	if r.f.resultErr != nil {
		return r.f.resultErr
	}
	*out.(*workflows.RunResult) = r.f.result
	return nil
}

func (f *lookingRun) looked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queries)
}

func awaitClient(f *lookingRun) *Client {
	c := New(f)
	c.decisionPoll = time.Millisecond
	return c
}

var (
	planning = look{state: workflows.State{Status: workflows.StatusRunning, Interrupts: []workflows.Interrupt{}}}
	atGate   = look{state: waitingOn("c-2", "cancel_order")}
)

// AwaitDecision looks until a call waits, and returns the state that shows
// it; a failed look (no worker answering yet) is looked past. Every look is
// the state query, refused by the server once the run is closed.
func TestAwaitDecisionWaitsUntilACallWaits(t *testing.T) {
	f := &lookingRun{looks: []look{planning, {err: errors.New("no poller seen for the task queue")}, planning, atGate}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := awaitClient(f).AwaitDecision(ctx, "r-1")
	require.NoError(t, err)
	require.Len(t, st.Interrupts, 1)
	assert.Equal(t, "c-2", st.Interrupts[0].CallID)
	assert.Equal(t, workflows.StatusWaitingForApproval, st.Status)
	assert.Equal(t, 4, f.looked())
	for _, q := range f.queries {
		assert.Equal(t, &sdkclient.QueryWorkflowWithOptionsRequest{WorkflowID: "r-1", QueryType: workflows.QueryState,
			QueryRejectCondition: enumspb.QUERY_REJECT_CONDITION_NOT_OPEN}, q)
	}
}

// A run that ends before any call waits: the error says so, with how it
// ended, and is ErrRunEnded; a run that continued as new is looked at again.
func TestAwaitDecisionOnARunThatEndsFirst(t *testing.T) {
	for _, c := range []struct {
		name   string
		result workflows.RunResult
		err    error
		want   string
	}{
		{"completed", workflows.RunResult{Status: workflows.StatusCompleted, Answer: "ORD-1 is cancelled"}, nil,
			"run r-1 completed without waiting for a decision: ORD-1 is cancelled"},
		{"failed", workflows.RunResult{Status: workflows.StatusFailed, Error: "the planner failed", Answer: "half done"}, nil,
			"run r-1 failed without waiting for a decision: the planner failed"},
		{"blocked", workflows.RunResult{Status: workflows.StatusBlocked, Error: "needs confirmation"}, nil,
			"run r-1 ended blocked without waiting for a decision: needs confirmation"},
		{"refused its input", workflows.RunResult{}, refused(ErrRefusedInput, "unknown field"),
			"run r-1 ended without waiting for a decision: unknown field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &lookingRun{looks: []look{planning, {rejected: enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW}, planning,
				{rejected: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED}}, result: c.result, resultErr: c.err}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := awaitClient(f).AwaitDecision(ctx, "r-1")
			require.Error(t, err)
			assert.Equal(t, c.want, err.Error())
			assert.ErrorIs(t, err, ErrRunEnded)
			var ended *EndedError
			require.ErrorAs(t, err, &ended)
			if c.err != nil {
				assert.ErrorIs(t, err, ErrRefusedInput, "the reason the result could not be read")
				assert.Nil(t, ended.Result)
			} else {
				assert.Equal(t, &c.result, ended.Result)
			}
			assert.Equal(t, 4, f.looked(), "past the continue-as-new, to the close")
		})
	}
}

// An unknown run is ErrUnknownRun at once; a run that never waits and never
// ends holds AwaitDecision until its context ends, which the error says.
func TestAwaitDecisionGivesUp(t *testing.T) {
	f := &lookingRun{looks: []look{{err: serviceerror.NewNotFound("workflow not found")}}}
	_, err := awaitClient(f).AwaitDecision(context.Background(), "nope")
	require.ErrorIs(t, err, ErrUnknownRun)
	assert.Equal(t, 1, f.looked())

	f = &lookingRun{looks: []look{planning}}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = awaitClient(f).AwaitDecision(ctx, "r-1")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "run r-1 has no call waiting for a decision yet (last look: status running)")
	assert.NotErrorIs(t, err, ErrRunEnded)
	assert.Greater(t, f.looked(), 2)
}
