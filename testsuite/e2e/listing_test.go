package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/inbox"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// fakeQueue is a task queue no worker polls.
const fakeQueue = "nobody-polls"

// startFakeWaitingRuns starts n AgentRuns as a hostile client can: with a raw
// Temporal client, on a task queue no worker polls, with the search
// attributes of a run waiting on close_ticket set at start (a client sets
// them as it likes). No worker ever runs them, so they never answer a query.
// It waits until visibility lists them as waiting.
func startFakeWaitingRuns(t *testing.T, s *stack, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("fake-waiting-%d", i+1)
		sa := temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrStatus).ValueSet(workflows.StatusWaitingForApproval),
			temporal.NewSearchAttributeKeyKeywordList(workflows.SearchAttrPendingTools).ValueSet([]string{"close_ticket"}))
		_, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: fakeQueue, TypedSearchAttributes: sa},
			workflows.WorkflowName, json.RawMessage(`{"goal":"x","planner":{"kind":"scripted","turns":[],"answer":"x"}}`))
		if err != nil {
			t.Fatalf("starting fake run %s: %v", id, err)
		}
		ids = append(ids, id)
	}
	awaitVisible(t, s, fmt.Sprintf("TaskQueue = '%s' AND %s = '%s'", fakeQueue, workflows.SearchAttrStatus, workflows.StatusWaitingForApproval), n)
	return ids
}

// awaitVisible waits until visibility counts want runs matching query.
func awaitVisible(t *testing.T, s *stack, query string, want int) {
	t.Helper()
	testenv.Eventually(t, waitTimeout, fmt.Sprintf("%d runs visible for %s", want, query), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		resp, err := s.client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
		if err != nil {
			return err
		}
		if resp.GetCount() != int64(want) {
			return fmt.Errorf("%d runs", resp.GetCount())
		}
		return nil
	})
}

// inboxList is GET /api/pending?query as the inbox page asks for it.
func inboxList(t *testing.T, srvURL, query string) inbox.List {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srvURL+"/api/pending?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(inbox.Header, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /api/pending: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/pending: %s: %s", resp.Status, body)
	}
	var l inbox.List
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatalf("GET /api/pending: %v: %s", err, body)
	}
	return l
}

// pendingJSON runs `toolgate pending --json` with args and returns its calls,
// its stderr and its exit code.
func pendingJSON(t *testing.T, args ...string) ([]tgclient.PendingCall, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, toolgateBinary(t), append([]string{"pending", "--json"}, args...)...)
	cmd.Env = childEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("toolgate pending: %v\n%s", err, stderr.String())
		}
		code = ee.ExitCode()
	}
	var calls []tgclient.PendingCall
	if code == 0 {
		if err := json.Unmarshal(out, &calls); err != nil {
			t.Fatalf("toolgate pending --json printed %q: %v", out, err)
		}
	}
	return calls, stderr.String(), code
}

// failedRuns are the run ids of failures.
func failedRuns(fs []tgclient.RunFailure) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.RunID)
	}
	slices.Sort(out)
	return out
}

// Issue 20, item 4: five AgentRuns started by a hostile client on a task
// queue no worker polls, each with ToolgateStatus=waiting_for_approval set at
// start, blanked `pending` and the inbox: they were listed and queried one
// after the other with no deadline of their own, and the real waiting call
// was reported failed. Now listing considers the runs of the served task
// queues only: client.Pending, the inbox's API and `toolgate pending` list
// the real call, report nothing failed and never query a fake. And where an
// operator does serve that queue (its workers are down), its runs are queried
// at once, each under a short deadline, and named as failed — the real call
// keeps its place.
func TestFakeWaitingRunsHideNoRealCall(t *testing.T) {
	s := newStack(t)
	s.startWorker(false)
	const real = "listing-real"
	s.start(real, workflows.RunInput{Goal: "close the login ticket", Planner: scripted("closed",
		step(call("close_ticket", `{"ticket_id":"TKT-3"}`)))})
	s.awaitNext(real, waitTimeout, "gate:close_ticket")
	fakes := startFakeWaitingRuns(t, s, 5)
	awaitVisible(t, s, fmt.Sprintf("%s = '%s'", workflows.SearchAttrStatus, workflows.StatusWaitingForApproval), 6)

	checkReal := func(what string, calls []tgclient.PendingCall) {
		t.Helper()
		if len(calls) != 1 || calls[0].RunID != real || calls[0].CallID != "c-1" || calls[0].Tool != "close_ticket" {
			t.Errorf("%s lists %+v, want the real run's c-1 (close_ticket) only", what, calls)
		}
	}

	// The served queue only (the default): no fake is listed or queried.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	page, err := s.tg.Pending(ctx, tgclient.PendingOptions{})
	if err != nil {
		t.Fatalf("client.Pending: %v", err)
	}
	checkReal("client.Pending", page.Calls)
	if len(page.Failed) != 0 || page.Runs != 1 {
		t.Errorf("client.Pending listed %d runs, failed %+v: a run of a queue nobody serves was listed", page.Runs, page.Failed)
	}
	page, err = s.tg.Pending(ctx, tgclient.PendingOptions{Tool: "close_ticket"})
	if err != nil || page.Runs != 1 {
		t.Errorf("client.Pending for close_ticket: %d runs, %v", page.Runs, err)
	}

	srv := httptest.NewServer(inbox.New(s.tg, inbox.Options{}))
	defer srv.Close()
	l := inboxList(t, srv.URL, "")
	if len(l.Calls) != 1 || l.Calls[0].Run != real || l.Calls[0].CallID != "c-1" || len(l.Failed) != 0 {
		t.Errorf("the inbox lists %+v, failed %+v; want the real c-1 only, nothing failed", l.Calls, l.Failed)
	}

	calls, stderr, code := pendingJSON(t, "--address", s.address())
	if code != 0 || stderr != "" {
		t.Errorf("toolgate pending: exit %d, stderr %q; want 0 and nothing on stderr", code, stderr)
	}
	checkReal("toolgate pending", calls)

	// Serving the fakes' queue too (its workers down): each fake is queried
	// under its own deadline, all at once, and named; the real call stays.
	both := []string{workflows.TaskQueue, fakeQueue}
	slow := tgclient.New(s.client, tgclient.WithQueryTimeout(time.Second))
	page, err = slow.Pending(ctx, tgclient.PendingOptions{TaskQueues: both})
	if err != nil {
		t.Fatalf("client.Pending over both queues: %v", err)
	}
	checkReal("client.Pending over both queues", page.Calls)
	if got := failedRuns(page.Failed); !slices.Equal(got, fakes) {
		t.Errorf("client.Pending over both queues names %q as failed, want the fakes %q", got, fakes)
	}
	for _, f := range page.Failed {
		if !strings.Contains(f.Error, "its state query did not answer within 1s") {
			t.Errorf("%s failed, but not for want of an answer within its 1s deadline: %s", f.RunID, f.Error)
		}
	}
	srv2 := httptest.NewServer(inbox.New(slow, inbox.Options{TaskQueues: both}))
	defer srv2.Close()
	l = inboxList(t, srv2.URL, "")
	if len(l.Calls) != 1 || l.Calls[0].Run != real || !slices.Equal(failedRuns(l.Failed), fakes) {
		t.Errorf("the inbox over both queues lists %+v, failed %+v; want the real c-1, the fakes failed", l.Calls, l.Failed)
	}
	calls, stderr, code = pendingJSON(t, "--address", s.address(), "--task-queue", workflows.TaskQueue, "--task-queue", fakeQueue, "--query-timeout", "1s")
	checkReal("toolgate pending over both queues", calls)
	var failed struct{ Failed []tgclient.RunFailure }
	if err := json.Unmarshal([]byte(stderr), &failed); code != 0 || err != nil || !slices.Equal(failedRuns(failed.Failed), fakes) {
		t.Errorf("toolgate pending over both queues: exit %d, stderr %q; want 0 and the fakes named", code, stderr)
	}
}

// Issue 20, item 10, on the real server: `toolgate pending`, client.Pending
// and the inbox page by runs at the visibility level, newest first, and
// filter by tool there: a page of two runs lists two runs' calls and says
// how to get the next; --page lists the rest; --all lists every page; a tool
// filter lists (and queries) only the runs waiting on that tool.
func TestPendingPagesByRuns(t *testing.T) {
	s := newStack(t)
	s.startWorker(false)
	ids := []string{"page-1", "page-2", "page-3"}
	for i, id := range ids {
		step1 := step(call("close_ticket", `{"ticket_id":"TKT-3"}`))
		if i == 0 {
			step1 = step(call("refund", `{"booking_id":"BK-2","amount_cents":100,"reason":"paging"}`))
		}
		s.start(id, workflows.RunInput{Goal: "wait", Planner: scripted("done", step1)})
		s.awaitStatus(id, workflows.StatusWaitingForApproval, 0, waitTimeout)
	}
	awaitVisible(t, s, fmt.Sprintf("%s = '%s'", workflows.SearchAttrStatus, workflows.StatusWaitingForApproval), 3)
	runsOf := func(calls []tgclient.PendingCall) []string {
		out := []string{}
		for _, c := range calls {
			out = append(out, c.RunID)
		}
		return out
	}

	first, stderr, code := pendingJSON(t, "--address", s.address(), "--page-size", "2")
	var next struct {
		NextPage string `json:"next_page"`
	}
	if err := json.Unmarshal([]byte(stderr), &next); code != 0 || err != nil || next.NextPage == "" {
		t.Fatalf("toolgate pending --page-size 2: exit %d, stderr %q; want 0 and the next page's token", code, stderr)
	}
	if got := runsOf(first); !slices.Equal(got, []string{"page-3", "page-2"}) {
		t.Errorf("the first page lists %q, want the two newest runs", got)
	}
	rest, stderr, code := pendingJSON(t, "--address", s.address(), "--page-size", "2", "--page", next.NextPage)
	if got := runsOf(rest); code != 0 || stderr != "" || !slices.Equal(got, []string{"page-1"}) {
		t.Errorf("the next page: exit %d, stderr %q, runs %q; want page-1 and no further page", code, stderr, got)
	}
	all, _, code := pendingJSON(t, "--address", s.address(), "--page-size", "1", "--all")
	if got := runsOf(all); code != 0 || !slices.Equal(got, []string{"page-3", "page-2", "page-1"}) {
		t.Errorf("--all: exit %d, runs %q; want all three, newest first", code, got)
	}
	refunds, _, code := pendingJSON(t, "--address", s.address(), "--tool", "refund")
	if got := runsOf(refunds); code != 0 || !slices.Equal(got, []string{"page-1"}) {
		t.Errorf("--tool refund: exit %d, runs %q; want page-1 only", code, got)
	}
	out, code := runCLI(t, waitTimeout, "pending", "--address", s.address(), "--page-size", "2")
	if code != 0 || !strings.Contains(out, "more runs wait: the next page is\n  toolgate pending --address "+s.address()+" --page-size 2 --page ") {
		t.Errorf("toolgate pending --page-size 2: exit %d; it does not say how to get the next page:\n%s", code, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	page, err := s.tg.Pending(ctx, tgclient.PendingOptions{Tool: "refund"})
	if err != nil || page.Runs != 1 || len(page.Calls) != 1 {
		t.Errorf("client.Pending for refund: %d runs listed and queried, %d calls, %v; want the one run waiting on refund", page.Runs, len(page.Calls), err)
	}

	srv := httptest.NewServer(inbox.New(s.tg, inbox.Options{PageSize: 2}))
	defer srv.Close()
	l := inboxList(t, srv.URL, "")
	if len(l.Calls) != 2 || l.Next == "" {
		t.Fatalf("the inbox's first page of 2 runs: %d calls, next %q", len(l.Calls), l.Next)
	}
	l = inboxList(t, srv.URL, "page="+l.Next)
	if len(l.Calls) != 1 || l.Calls[0].Run != "page-1" || l.Next != "" {
		t.Errorf("the inbox's second page: %+v, next %q; want page-1's call, the last page", l.Calls, l.Next)
	}
}
