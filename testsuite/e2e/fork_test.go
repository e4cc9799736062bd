package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// A fork at call 3 with edited arguments starts with the source's memo (a
// read it repeats is a cache_hit), its edited call waits for an approval of
// its own (the source's is not carried), its key is its own, and the source
// run is untouched. A client that puts a memo or a trace into a fork's input
// is refused, and so is a fork input that sets the run's goal.
func TestForkAtACallWithEditedArguments(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startWorker(false)
	const src = "fork-source"
	s.start(src, workflows.RunInput{Goal: "close the login ticket", Planner: scripted("done",
		step(call("search_tickets", `{"query":"login"}`)),
		step(call("cached_order_status", `{"order_id":"ORD-1001"}`)),
		step(call("close_ticket", `{"ticket_id":"TKT-3"}`)),
		step(call("cached_order_status", `{"order_id":"ORD-1001"}`)))})
	s.awaitCalls(src, "c-3")
	s.approveAll(src, "alice", "c-3")
	if res := s.result(src, waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("source: %+v", res)
	}
	before, err := s.client.DescribeWorkflowExecution(rewindCtx(t), src, "")
	if err != nil {
		t.Fatal(err)
	}

	const fork = "fork-of-source"
	if _, err := s.tg.Fork(rewindCtx(t), src, "c-3", fork, json.RawMessage(`{"ticket_id":"TKT-4"}`), tgclient.Operator{Name: "olga"}); err != nil {
		t.Fatal(err)
	}
	st := s.awaitCalls(fork, "c-3")
	if it := st.Interrupts[0]; it.Tool != "close_ticket" || string(it.CallArgs) != `{"ticket_id":"TKT-4"}` {
		t.Fatalf("the fork waits for %+v, want close_ticket TKT-4", it)
	}
	if st.Memo.Entries != 2 {
		t.Errorf("the fork's memo: %+v, want the source's two reads", st.Memo)
	}
	s.approveAll(fork, "bob", "c-3")
	res := s.result(fork, waitTimeout)
	if res.Status != workflows.StatusCompleted {
		t.Fatalf("fork: %+v", res)
	}
	if res.Trace[0].Status != workflows.TraceForked || res.Trace[0].CallID != "c-3" || !strings.Contains(res.Trace[0].Reason, src) || !strings.Contains(res.Trace[0].Reason, "arguments replaced") {
		t.Errorf("the fork's first trace record: %+v", res.Trace[0])
	}
	checkEvents(t, "fork trace", res.Trace[1:],
		event{"c-3", "close_ticket", workflows.TraceBlocked},
		event{"c-3", "close_ticket", workflows.TraceApproved},
		event{"c-3", "close_ticket", workflows.TraceOK},
		event{"c-4", "cached_order_status", workflows.TraceCacheHit},
	)
	if tk := s.ticket("TKT-4"); tk.Status != "closed" || tk.ClosedBy != s.key(fork, "c-3") || tk.ApprovedBy != "bob" {
		t.Errorf("TKT-4 %+v: want closed by the fork's own key %s, approved by bob", tk, s.key(fork, "c-3"))
	}
	testenv.Eventually(t, waitTimeout, "the fork found by its source", func() error {
		resp, err := s.client.ListWorkflow(rewindCtx(t), &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("%s = '%s/c-3'", workflows.SearchAttrForkedFrom, src)})
		if err != nil {
			return err
		}
		if n := len(resp.GetExecutions()); n != 1 || resp.GetExecutions()[0].GetExecution().GetWorkflowId() != fork {
			return fmt.Errorf("%d runs forked from %s/c-3", n, src)
		}
		return nil
	})
	after, err := s.client.DescribeWorkflowExecution(rewindCtx(t), src, "")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := after.GetWorkflowExecutionInfo(), before.GetWorkflowExecutionInfo(); a.GetExecution().GetRunId() != b.GetExecution().GetRunId() || a.GetHistoryLength() != b.GetHistoryLength() {
		t.Errorf("the fork changed its source: %v -> %v", b, a)
	}

	// Forged state in a fork's input, sent past toolgate's client.
	forged := map[string]workflows.RunInput{
		"fork-forged-memo": {Fork: &workflows.Fork{Source: src, At: "c-3"},
			Carry: &workflows.Carry{Memo: []workflows.MemoEntry{{Key: "x", Tool: "close_ticket", Result: json.RawMessage(`{"closed":true}`)}}}},
		"fork-forged-trace": {Fork: &workflows.Fork{Source: src, At: "c-3"},
			Carry: &workflows.Carry{Trace: []workflows.TraceRecord{{Seq: 1, CallID: "c-1", Status: workflows.TraceApproved, Approver: "alice"}}}},
		"fork-with-goal": {Fork: &workflows.Fork{Source: src, At: "c-3"}, Goal: "do something else"},
	}
	for id, in := range forged {
		run, err := s.client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.WorkflowName, in)
		if err != nil {
			t.Fatal(err)
		}
		var r workflows.RunResult
		err = run.Get(rewindCtx(t), &r)
		if err == nil || !(strings.Contains(err.Error(), "carry refused") || strings.Contains(err.Error(), "a fork's input holds only fork")) {
			t.Errorf("%s: %v, want refused", id, err)
		}
	}
}
