package client

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/toolgate/toolgate/workflows"
)

// fakeRuns is a Temporal client's view of some runs: their ids (listed two
// per page), their states, and the runs whose state query fails.
type fakeRuns struct {
	sdkclient.Client // only ListWorkflow and QueryWorkflow are called
	ids              []string
	states           map[string]workflows.State
	fail             map[string]error
	listErr          error
	queries          []string
}

func (f *fakeRuns) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	if f.listErr != nil {
		return nil, f.listErr
	}
	start := 0
	if len(req.GetNextPageToken()) > 0 {
		start = int(req.GetNextPageToken()[0])
	}
	end := min(start+2, len(f.ids))
	resp := &workflowservice.ListWorkflowExecutionsResponse{}
	for _, id := range f.ids[start:end] {
		resp.Executions = append(resp.Executions, &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id}})
	}
	if end < len(f.ids) {
		resp.NextPageToken = []byte{byte(end)}
	}
	return resp, nil
}

func (f *fakeRuns) QueryWorkflow(_ context.Context, id, _, name string, _ ...any) (converter.EncodedValue, error) {
	f.queries = append(f.queries, id+" "+name)
	if err := f.fail[id]; err != nil {
		return nil, err
	}
	p, err := converter.GetDefaultDataConverter().ToPayloads(f.states[id])
	if err != nil {
		return nil, err
	}
	return encodedValue{p}, nil
}

type encodedValue struct{ p *commonpb.Payloads }

func (v encodedValue) HasValue() bool { return v.p != nil }
func (v encodedValue) Get(out any) error {
	return converter.GetDefaultDataConverter().FromPayloads(v.p, out)
}

func waitingOn(callID, toolName string) workflows.State {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	return workflows.State{Status: workflows.StatusWaitingForApproval, Interrupts: []workflows.Interrupt{{
		CallID: callID, Tool: toolName, CallArgs: json.RawMessage(`{}`), ArgsDigest: "d-" + callID,
		Kind: workflows.KindGate, RequestedAt: at, ExpiresAt: at.Add(time.Hour)}}}
}

// One run whose state query fails (here: its state is over the payload
// limit) does not hide the others: every run is asked, over two pages, and
// the failed one is named.
func TestPendingListsOtherRunsWhenOneQueryFails(t *testing.T) {
	ctx := context.Background()
	wedged := errors.New("[TMPRL1103] Complete result exceeds size limit")
	runs := &fakeRuns{
		ids:    []string{"run-a", "run-wedged", "run-c"},
		states: map[string]workflows.State{"run-a": waitingOn("c-3", "close_ticket"), "run-c": waitingOn("c-1", "refund")},
		fail:   map[string]error{"run-wedged": wedged},
	}
	res, err := New(runs).AllPending(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"run-a state", "run-wedged state", "run-c state"}, runs.queries, "every run is asked, over two pages")
	require.Len(t, res.Calls, 2)
	assert.Equal(t, "run-a", res.Calls[0].RunID)
	assert.Equal(t, "c-3", res.Calls[0].CallID)
	assert.Equal(t, "run-c", res.Calls[1].RunID)
	assert.Equal(t, []RunFailure{{RunID: "run-wedged", Error: wedged.Error()}}, res.Failed)
	assert.Equal(t, 3, res.Runs)

	page, err := New(runs).Pending(ctx, PendingOptions{})
	require.NoError(t, err)
	assert.Equal(t, 2, page.Runs)
	assert.NotEmpty(t, page.NextPageToken, "a page at a time")
}

// When no run can be queried, or the runs cannot be listed, AllPending fails
// (and still names each run that failed).
func TestPendingFailsWhenNothingCouldBeAsked(t *testing.T) {
	ctx := context.Background()
	runs := &fakeRuns{ids: []string{"run-a", "run-b"}, fail: map[string]error{
		"run-a": errors.New("context deadline exceeded"), "run-b": errors.New("no poller"),
	}}
	res, err := New(runs).AllPending(ctx)
	require.ErrorContains(t, err, "none of the 2 runs found could be queried")
	assert.Len(t, res.Failed, 2)

	_, err = New(&fakeRuns{listErr: errors.New("visibility unavailable")}).AllPending(ctx)
	require.ErrorContains(t, err, "listing runs: visibility unavailable")

	res, err = New(&fakeRuns{}).AllPending(ctx)
	require.NoError(t, err, "no run at all is not a failure")
	assert.Empty(t, res.Calls)
}
