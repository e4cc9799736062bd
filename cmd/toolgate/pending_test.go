package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/toolgate/toolgate/workflows"
)

// fakeRuns is a Temporal client's view of some runs: their ids (listed two
// per page), their states, and the runs whose state query fails.
type fakeRuns struct {
	ids     []string
	states  map[string]workflows.State
	fail    map[string]error
	listErr error
	queries []string
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
// limit) does not hide the others: `pending` lists them, names the failed
// run, and exits 0; --json keeps its array on stdout and puts the failed
// runs on stderr.
func TestPendingListsOtherRunsWhenOneQueryFails(t *testing.T) {
	ctx := context.Background()
	wedged := errors.New("[TMPRL1103] Complete result exceeds size limit")
	runs := &fakeRuns{
		ids:    []string{"run-a", "run-wedged", "run-c"},
		states: map[string]workflows.State{"run-a": waitingOn("c-3", "close_ticket"), "run-c": waitingOn("c-1", "refund")},
		fail:   map[string]error{"run-wedged": wedged},
	}
	res, err := inbox(ctx, runs)
	require.NoError(t, err)
	assert.Equal(t, []string{"run-a state", "run-wedged state", "run-c state"}, runs.queries, "every run is asked, over two pages")
	require.Len(t, res.Items, 2)
	assert.Equal(t, "run-a", res.Items[0].RunID)
	assert.Equal(t, "c-3", res.Items[0].CallID)
	assert.Equal(t, "run-c", res.Items[1].RunID)
	assert.Equal(t, []runFailure{{Run: "run-wedged", Error: wedged.Error()}}, res.Failed)

	var stdout, stderr bytes.Buffer
	c := &cli{stdout: &stdout, stderr: &stderr}
	require.NoError(t, c.printPending(res, nil, false))
	assert.Contains(t, stdout.String(), "run-a")
	assert.Contains(t, stdout.String(), "run-c")
	assert.NotContains(t, stdout.String(), "run-wedged")
	assert.Equal(t, "run run-wedged not listed: its state query failed: [TMPRL1103] Complete result exceeds size limit\n", stderr.String())

	stdout.Reset()
	stderr.Reset()
	require.NoError(t, c.printPending(res, nil, true))
	var items []struct {
		Run        string `json:"run"`
		CallID     string `json:"call_id"`
		Tool       string `json:"tool"`
		ArgsDigest string `json:"args_digest"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &items), "stdout is the array it always was: %s", stdout.String())
	require.Len(t, items, 2)
	assert.Equal(t, "run-a", items[0].Run)
	assert.Equal(t, "c-3", items[0].CallID)
	assert.Equal(t, "d-c-3", items[0].ArgsDigest)
	assert.Equal(t, "run-c", items[1].Run)
	assert.Equal(t, "refund", items[1].Tool)
	var failed struct {
		Failed []runFailure `json:"failed"`
	}
	require.NoError(t, json.Unmarshal(stderr.Bytes(), &failed), stderr.String())
	assert.Equal(t, res.Failed, failed.Failed)
}

// When no run can be queried, or the runs cannot be listed, pending fails
// (and still names each run that failed).
func TestPendingFailsWhenNothingCouldBeAsked(t *testing.T) {
	ctx := context.Background()
	runs := &fakeRuns{ids: []string{"run-a", "run-b"}, fail: map[string]error{
		"run-a": errors.New("context deadline exceeded"), "run-b": errors.New("no poller"),
	}}
	res, err := inbox(ctx, runs)
	require.ErrorContains(t, err, "none of the 2 runs found could be queried")
	var stdout, stderr bytes.Buffer
	c := &cli{stdout: &stdout, stderr: &stderr}
	require.Error(t, c.printPending(res, err, false))
	assert.Empty(t, stdout.String(), "no table that could read as 'nothing is waiting'")
	assert.Equal(t, 2, strings.Count(stderr.String(), "not listed"), stderr.String())

	_, err = inbox(ctx, &fakeRuns{listErr: errors.New("visibility unavailable")})
	require.ErrorContains(t, err, "listing runs: visibility unavailable")

	res, err = inbox(ctx, &fakeRuns{})
	require.NoError(t, err, "no run at all is not a failure")
	assert.Empty(t, res.Items)
	stdout.Reset()
	require.NoError(t, c.printPending(res, nil, true))
	assert.Equal(t, "[]\n", stdout.String())
}
