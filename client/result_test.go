package client

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/workflows"
)

// missedClose is a Temporal client whose result long poll misses the run's
// close, as the server's does now and then: the first `stuck` Gets wait until
// cancelled (they would wait out the 20 s long poll), later ones answer at
// once. Describe says whether the run has closed.
type missedClose struct {
	sdkclient.Client // only GetWorkflow and DescribeWorkflowExecution are called
	stuck            int
	status           enumspb.WorkflowExecutionStatus

	mu        sync.Mutex
	gets      int
	describes int
}

type fakeRun struct {
	sdkclient.WorkflowRun
	c *missedClose
}

func (f *missedClose) GetWorkflow(context.Context, string, string) sdkclient.WorkflowRun {
	return fakeRun{c: f}
}

func (r fakeRun) Get(ctx context.Context, out any) error {
	r.c.mu.Lock()
	r.c.gets++
	n := r.c.gets
	r.c.mu.Unlock()
	if n <= r.c.stuck {
		<-ctx.Done()
		return ctx.Err()
	}
	*out.(*workflows.RunResult) = workflows.RunResult{Status: workflows.StatusCompleted, Answer: "done"}
	return nil
}

func (f *missedClose) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.describes++
	return &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: f.status}}, nil
}

// A run that closed while the long poll missed it: Result asks again and
// returns the result, instead of waiting out the server's long poll.
func TestResultOutlivesAMissedClose(t *testing.T) {
	fake := &missedClose{stuck: 1, status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED}
	c := New(fake)
	c.resultCheck = 5 * time.Millisecond
	// The context stands in for the long poll's 20 s: without the check,
	// Result would end with its deadline instead of the result.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Result(ctx, "r-1")
	require.NoError(t, err)
	assert.Equal(t, "done", res.Answer)
	assert.Equal(t, 2, fake.gets, "one missed poll, then one that answered")
	assert.GreaterOrEqual(t, fake.describes, 1)
}

// While the run is still running, Result keeps waiting on the same poll: it
// does not restart it on every check.
func TestResultKeepsWaitingWhileTheRunRuns(t *testing.T) {
	fake := &missedClose{stuck: 1, status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
	c := New(fake)
	c.resultCheck = time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Result(ctx, "r-1")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 1, fake.gets, "a running run's poll is never restarted")
	assert.Greater(t, fake.describes, 1)
}

// A poll that keeps missing a closed run is restarted a bounded number of
// times, then waited on.
func TestResultRestartsABoundedNumberOfTimes(t *testing.T) {
	fake := &missedClose{stuck: 100, status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED}
	c := New(fake)
	c.resultCheck = time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Result(ctx, "r-1")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, maxResultRestarts+1, fake.gets)
}
