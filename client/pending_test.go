package client

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/toolgate/toolgate/workflows"
)

// fakeRuns is a Temporal client's view of some runs: their ids (listed two
// per page), their states, and the runs whose state query fails or hangs.
type fakeRuns struct {
	sdkclient.Client // only ListWorkflow and QueryWorkflow are called
	ids              []string
	states           map[string]workflows.State
	fail             map[string]error
	// hang: these runs' queries answer only when their context ends (or,
	// as a last resort, after hungFor).
	hang map[string]bool
	// waitFor: these runs' queries answer only once every run of hang is
	// being queried at the same time (or their context ends).
	waitFor     map[string]bool
	perPage     int // runs per page (0: as asked)
	listErr     error
	noSearchAtt bool // a query naming ToolgateStatus fails, as in a namespace without it

	mu      sync.Mutex
	queries []string
	lists   []*workflowservice.ListWorkflowExecutionsRequest
	hanging int           // queries of hang runs in flight now
	allHung chan struct{} // closed when every run of hang is being queried at once
}

const hungFor = 10 * time.Second

func (f *fakeRuns) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	f.mu.Lock()
	f.lists = append(f.lists, proto.Clone(req).(*workflowservice.ListWorkflowExecutionsRequest))
	f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	if f.noSearchAtt && strings.Contains(req.GetQuery(), workflows.SearchAttrStatus) {
		return nil, errors.New("invalid query: unknown search attribute ToolgateStatus")
	}
	start := 0
	if len(req.GetNextPageToken()) > 0 {
		start = int(req.GetNextPageToken()[0])
	}
	n := int(req.GetPageSize())
	if f.perPage > 0 {
		n = f.perPage
	}
	end := min(start+n, len(f.ids))
	resp := &workflowservice.ListWorkflowExecutionsResponse{}
	for _, id := range f.ids[start:end] {
		resp.Executions = append(resp.Executions, &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id}, TaskQueue: "toolgate"})
	}
	if end < len(f.ids) {
		resp.NextPageToken = []byte{byte(end)}
	}
	return resp, nil
}

func (f *fakeRuns) QueryWorkflow(ctx context.Context, id, _, name string, _ ...any) (converter.EncodedValue, error) {
	f.mu.Lock()
	f.queries = append(f.queries, id+" "+name)
	if f.hang[id] {
		f.hanging++
		if f.hanging == len(f.hang) && f.allHung != nil {
			select {
			case <-f.allHung:
			default:
				close(f.allHung)
			}
		}
	}
	f.mu.Unlock()
	switch {
	case f.hang[id]:
		defer func() { f.mu.Lock(); f.hanging--; f.mu.Unlock() }()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(hungFor):
			return nil, errors.New("hung: nothing ended the query")
		}
	case f.waitFor[id]:
		select {
		case <-f.allHung:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := f.fail[id]; err != nil {
		return nil, err
	}
	var v any = f.states[id]
	if name == workflows.QueryTrace {
		v = []workflows.TraceRecord{{Seq: 1, CallID: "c-0", Tool: "search_tickets", Status: "ok"}}
	}
	p, err := converter.GetDefaultDataConverter().ToPayloads(v)
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
		perPage: 2,
		ids:     []string{"run-a", "run-wedged", "run-c"},
		states:  map[string]workflows.State{"run-a": waitingOn("c-3", "close_ticket"), "run-c": waitingOn("c-1", "refund")},
		fail:    map[string]error{"run-wedged": wedged},
	}
	res, err := New(runs).AllPending(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"run-a state", "run-wedged state", "run-c state"}, runs.queries, "every run is asked, over two pages")
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
	runs := &fakeRuns{perPage: 2, ids: []string{"run-a", "run-b"}, fail: map[string]error{
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

// Five runs whose queries never answer (a run on a queue no worker polls,
// say) cost the waiting run its place neither by order nor by time: the runs
// of a page are queried at once, each under its own short deadline, and each
// one that did not answer is named with why. (Here the real run answers only
// once all five are being queried at the same time, and is listed last.)
func TestPendingQueriesRunsConcurrentlyEachUnderItsOwnDeadline(t *testing.T) {
	const timeout = 1500 * time.Millisecond
	hang := map[string]bool{"fake-1": true, "fake-2": true, "fake-3": true, "fake-4": true, "fake-5": true}
	runs := &fakeRuns{
		ids:     []string{"fake-1", "fake-2", "fake-3", "fake-4", "fake-5", "real"},
		states:  map[string]workflows.State{"real": waitingOn("c-3", "close_ticket")},
		hang:    hang,
		waitFor: map[string]bool{"real": true},
		allHung: make(chan struct{}),
	}
	page, err := New(runs, WithQueryTimeout(timeout)).Pending(context.Background(), PendingOptions{PageSize: 10})
	require.NoError(t, err)
	require.Len(t, page.Calls, 1, "the real run is listed: %+v", page.Failed)
	assert.Equal(t, "real", page.Calls[0].RunID)
	assert.Equal(t, 6, page.Runs)
	var failed []string
	for _, f := range page.Failed {
		failed = append(failed, f.RunID)
		assert.Contains(t, f.Error, "its state query did not answer within 1.5s (is a toolgate worker polling task queue \"toolgate\"?)", f.RunID)
	}
	assert.Equal(t, []string{"fake-1", "fake-2", "fake-3", "fake-4", "fake-5"}, failed, "each fake named, in the listing's order")
	assert.Len(t, runs.queries, 6, "each run asked once")
}

// Listing asks visibility for the running AgentRuns of the served task
// queues only (the Client's by default), waiting for approval, and, with a
// tool, waiting on that tool; a page is bounded.
func TestPendingAsksVisibilityForTheServedQueuesOnly(t *testing.T) {
	ctx := context.Background()
	runs := &fakeRuns{ids: []string{"run-a"}, states: map[string]workflows.State{"run-a": waitingOn("c-1", "refund")}}
	_, err := New(runs).Pending(ctx, PendingOptions{})
	require.NoError(t, err)
	_, err = New(runs, WithTaskQueue("desk")).Pending(ctx, PendingOptions{Tool: "close_ticket", PageSize: 20})
	require.NoError(t, err)
	_, err = New(runs).Pending(ctx, PendingOptions{TaskQueues: []string{"a", `it's\q`}, RunID: "run-a"})
	require.NoError(t, err)
	require.Len(t, runs.lists, 3)
	assert.Equal(t, `WorkflowType = 'AgentRun' AND ExecutionStatus = 'Running' AND TaskQueue IN ('toolgate') AND (ToolgateStatus = 'waiting_for_approval' OR ToolgateStatus IS NULL)`, runs.lists[0].GetQuery())
	assert.EqualValues(t, DefaultPageSize, runs.lists[0].GetPageSize())
	assert.Equal(t, `WorkflowType = 'AgentRun' AND ExecutionStatus = 'Running' AND TaskQueue IN ('desk') AND ((ToolgateStatus = 'waiting_for_approval' AND ToolgatePendingTools = 'close_ticket') OR ToolgateStatus IS NULL)`, runs.lists[1].GetQuery())
	assert.EqualValues(t, 20, runs.lists[1].GetPageSize())
	assert.Equal(t, `WorkflowType = 'AgentRun' AND ExecutionStatus = 'Running' AND TaskQueue IN ('a', 'it\'s\\q') AND WorkflowId = 'run-a' AND (ToolgateStatus = 'waiting_for_approval' OR ToolgateStatus IS NULL)`, runs.lists[2].GetQuery())

	_, err = New(runs).Pending(ctx, PendingOptions{PageSize: MaxPageSize + 1})
	require.ErrorContains(t, err, "page size 201: want 1 to 200 runs")
	_, err = New(runs).Pending(ctx, PendingOptions{TaskQueues: []string{""}})
	require.ErrorContains(t, err, "a task queue to list has no name")
}

// In a namespace without toolgate's search attributes, listing falls back
// to every running AgentRun of the served queues, and the tool filter is
// applied to the calls after querying.
func TestPendingWithoutSearchAttributes(t *testing.T) {
	runs := &fakeRuns{ids: []string{"run-a", "run-b"}, noSearchAtt: true, states: map[string]workflows.State{
		"run-a": waitingOn("c-1", "refund"), "run-b": waitingOn("c-2", "close_ticket")}}
	page, err := New(runs).Pending(context.Background(), PendingOptions{Tool: "close_ticket", TraceRecords: 3})
	require.NoError(t, err)
	require.Len(t, runs.lists, 2)
	assert.Equal(t, `WorkflowType = 'AgentRun' AND ExecutionStatus = 'Running' AND TaskQueue IN ('toolgate')`, runs.lists[1].GetQuery())
	require.Len(t, page.Calls, 1)
	assert.Equal(t, "run-b", page.Calls[0].RunID)
	assert.Contains(t, page.Traces, "run-b", "the trace of each queried run is read too")
}
