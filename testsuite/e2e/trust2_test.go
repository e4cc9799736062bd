package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/demo"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// The trust boundary's second pass (issue 20) on the real server, for what a
// client can do with a start: a cron schedule or a workflow retry policy
// hands the next run its predecessor's input, and with it a client-written
// carry; a run that waits is flooded with refused signals of 1.9 MB.
func TestTrustSecondPassStarts(t *testing.T) {
	s := newStack(t)
	s.startWorker(false) // no --allow-auto-approve
	d := s.openDesk()
	ticketOpen := func(t *testing.T, id string) {
		t.Helper()
		if tk, err := d.Ticket(context.Background(), id); err != nil || tk.Status != "open" {
			t.Fatalf("%s: %+v, %v; want it still open", id, tk, err)
		}
	}
	forged := json.RawMessage(`{"goal":"x","approval":"always_approve",
	  "planner":{"kind":"scripted","turns":[[{"tool":"close_ticket","args":{"ticket_id":"TKT-5"}}]],"answer":"done"},
	  "carry":{"config":{"tools":[{"name":"close_ticket"}],"allow_auto_approve":true},"turn":1,"transcript":[{"role":"user","text":"x"}]}}`)

	t.Run("a cron schedule is refused, every time", func(t *testing.T) {
		const id = "trust2-cron"
		ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
		defer cancel()
		if _, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue, CronSchedule: "@every 2s"},
			workflows.WorkflowName, forged); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.client.TerminateWorkflow(context.Background(), id, "", "test over") }()
		// Each cron run gets the same input; each is refused before anything runs.
		var failed []error
		testenv.Eventually(t, 2*waitTimeout, "two cron runs ended", func() error {
			failed = closedRunErrors(t, s, id)
			if len(failed) < 2 {
				return fmt.Errorf("%d cron runs ended", len(failed))
			}
			return nil
		})
		for _, err := range failed {
			requireInvalidInput(t, err, `cron schedule "@every 2s" refused`)
		}
		ticketOpen(t, "TKT-5")
	})

	t.Run("a retried run gets no carry", func(t *testing.T) {
		// The first run times out before any worker polls its queue; the
		// retry gets the same input, carry and all, "continued" from it.
		const id, queue = "trust2-retry", "trust2-retry"
		ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
		defer cancel()
		first, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue, WorkflowRunTimeout: 3 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: 3 * time.Second, MaximumAttempts: 2}}, workflows.WorkflowName, forged)
		if err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, waitTimeout, "the retry started", func() error {
			desc, err := s.client.DescribeWorkflowExecution(ctx, id, "")
			if err != nil {
				return err
			}
			if desc.GetWorkflowExecutionInfo().GetExecution().GetRunId() == first.GetRunID() {
				return fmt.Errorf("still the first run")
			}
			return nil
		})
		opts, dk, err := demo.OptionsWithDesk(s.dataDir, s.deskDB)
		if err != nil {
			t.Fatal(err)
		}
		defer dk.Close()
		w, err := worker.Start(s.client, queue, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		err = s.client.GetWorkflow(ctx, id, "").Get(ctx, nil)
		requireInvalidInput(t, err, fmt.Sprintf("carry refused: run %s, which this run follows, closed TimedOut, not ContinuedAsNew", first.GetRunID()))
		ticketOpen(t, "TKT-5")
	})

	t.Run("refused signals of 1.9 MB do not end a waiting run", func(t *testing.T) {
		// 40 refused approvals of 1.9 MB each, each sent once the run has
		// taken the one before: 76 MB, past the 50 MB a run's history may
		// hold. The run continues as new while it waits, its call waiting on
		// the same question, and the call closes once.
		const id = "trust2-flood"
		s.start(id, workflows.RunInput{Goal: "close it", Planner: scripted("closed", step(call("close_ticket", `{"ticket_id":"TKT-4"}`)))})
		before := s.awaitStatus(id, workflows.StatusWaitingForApproval, 0, waitTimeout).Interrupts[0]
		note := strings.Repeat("n", 1_900_000)
		var st workflows.State
		for i := range 40 {
			in := workflows.DecisionInput{CallID: "c-9", Approver: "x", Note: note, ArgsDigest: fmt.Sprint(i)}
			raw, _ := json.Marshal(in)
			sum := sha256.Sum256(raw)
			s.signal(id, workflows.SignalApprove, in)
			testenv.Eventually(t, waitTimeout, fmt.Sprintf("signal %d refused", i), func() error {
				var err error
				if st, err = s.state(id); err != nil {
					return err
				}
				if n := len(st.Refused); n == 0 || st.Refused[n-1].PayloadSHA256 != hex.EncodeToString(sum[:]) {
					return fmt.Errorf("not yet")
				}
				return nil
			})
		}
		if runs := countRuns(t, s, id); runs < 10 {
			t.Errorf("%d runs: want the waiting run to have continued as new as the signals came", runs)
		}
		if st.Status != workflows.StatusWaitingForApproval || len(st.Interrupts) != 1 {
			t.Fatalf("state %s, %+v: want still waiting on c-1", st.Status, st.Interrupts)
		}
		after := st.Interrupts[0]
		if after.CallID != before.CallID || after.ArgsDigest != before.ArgsDigest || !after.RequestedAt.Equal(before.RequestedAt) || !after.ExpiresAt.Equal(before.ExpiresAt) {
			t.Errorf("waits on %+v, want the same question as before the flood, %+v", after, before)
		}
		if _, err := s.approveByUpdate(id, workflows.DecisionInput{CallID: "c-1", Approver: "alice", ArgsDigest: after.ArgsDigest}); err != nil {
			t.Fatal(err)
		}
		res := s.result(id, waitTimeout)
		if res.Status != workflows.StatusCompleted {
			t.Fatalf("%s (%s), want completed", res.Status, res.Error)
		}
		checkEvents(t, "result", res.Trace[len(res.Trace)-2:], event{"c-1", "close_ticket", workflows.TraceApproved}, event{"c-1", "close_ticket", workflows.TraceOK})
		if tk, err := d.Ticket(context.Background(), "TKT-4"); err != nil || tk.Status != "closed" {
			t.Fatalf("TKT-4: %+v, %v; want closed", tk, err)
		}
	})
}

// closedRunErrors is the failure each closed run of workflow id ended
// with: a cron run that failed closes "continued as new" into the next
// run, with its failure in its close event.
func closedRunErrors(t *testing.T, s *stack, id string) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	resp, err := s.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowId = %q AND ExecutionStatus != 'Running'", id)})
	if err != nil {
		t.Fatal(err)
	}
	var out []error
	for _, e := range resp.GetExecutions() {
		it := s.client.GetWorkflowHistory(ctx, id, e.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		f := ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetFailure()
		if f == nil {
			f = ev.GetWorkflowExecutionFailedEventAttributes().GetFailure()
		}
		if f == nil {
			out = append(out, fmt.Errorf("closed with %s", ev.GetEventType()))
			continue
		}
		out = append(out, temporal.GetDefaultFailureConverter().FailureToError(f))
	}
	return out
}
