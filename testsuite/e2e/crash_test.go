package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/activities/desk"
	"github.com/toolgate/toolgate/workflows"
)

// A worker killed -9 while a run waits at the gate loses nothing: a new
// worker picks the run up from its history, and the approval goes through.
func TestWorkerCrashWhileWaiting(t *testing.T) {
	t.Parallel()
	testWorkerCrashWhileWaiting(t, newStack(t))
}

// testWorkerCrashWhileWaiting is TestWorkerCrashWhileWaiting on s (SQLite or PostgreSQL).
func testWorkerCrashWhileWaiting(t *testing.T, s *stack) {
	first := s.startWorkerProc("worker 1", nil)

	const id = "crash-while-waiting"
	s.start(id, workflows.RunInput{
		Goal: "read the login ticket and close it",
		Planner: scripted("done",
			step(call("get_ticket", `{"ticket_id":"TKT-3"}`)),
			step(call("close_ticket", `{"ticket_id":"TKT-3","resolution":"password reset fixed"}`)),
		),
	})
	s.awaitNext(id, waitTimeout, "gate:close_ticket")
	digest := s.mustState(id).Interrupts[0].ArgsDigest

	first.kill()
	if err := first.wait(t, 10*time.Second); !killedBySIGKILL(err) {
		t.Fatalf("worker 1 exit: %v, want killed by SIGKILL", err)
	}
	s.startWorkerProc("worker 2", nil)

	dec, err := s.approveByUpdate(id, workflows.DecisionInput{CallID: "c-2", Approver: "bob", ArgsDigest: digest})
	if err != nil {
		t.Fatalf("approve update after the crash: %v", err)
	}
	if dec.Decision != workflows.TraceApproved || dec.CallID != "c-2" || dec.Tool != "close_ticket" || dec.Approver != "bob" {
		t.Fatalf("decision %+v, want c-2 close_ticket approved by bob", dec)
	}
	res := s.result(id, waitTimeout)
	if res.Status != workflows.StatusCompleted {
		t.Fatalf("result %+v, want completed", res)
	}
	checkEvents(t, "result trace", res.Trace,
		event{"c-1", "get_ticket", workflows.TraceOK},
		event{"c-2", "close_ticket", workflows.TraceBlocked},
		event{"c-2", "close_ticket", workflows.TraceApproved},
		event{"c-2", "close_ticket", workflows.TraceOK},
	)
	tk, err := s.openDesk().Ticket(context.Background(), "TKT-3")
	if err != nil {
		t.Fatal(err)
	}
	if key := s.key(id, "c-2"); tk.Status != "closed" || tk.ClosedBy != key || tk.ApprovedBy != "bob" {
		t.Fatalf("TKT-3 %+v, want closed by %s, approved by bob", tk, key)
	}
}

// The worst moment for exactly-once: the worker dies (SIGKILL) right after
// refund committed its payment and before the activity reported back. The
// activity is retried on another worker once its start-to-close timeout has
// passed, finds the payment under the same idempotency key, and pays nothing.
func TestWorkerCrashAfterSideEffect(t *testing.T) {
	t.Parallel()
	testWorkerCrashAfterSideEffect(t, newStack(t))
}

// testWorkerCrashAfterSideEffect is TestWorkerCrashAfterSideEffect on s (SQLite or PostgreSQL).
func testWorkerCrashAfterSideEffect(t *testing.T, s *stack) {

	// The refund's declared timeout decides how long the retry takes.
	var attemptTimeout, retryInterval time.Duration
	d := s.openDesk()
	for _, tl := range d.Tools() {
		if tl.Spec.Name == "refund" {
			attemptTimeout, retryInterval = tl.Spec.AttemptTimeout(), tl.Spec.RetryInterval()
		}
	}
	if attemptTimeout == 0 {
		t.Fatal("the desk declares no refund tool")
	}
	t.Logf("refund: start-to-close timeout %v, first retry after %v", attemptTimeout, retryInterval)

	crashing := s.startWorkerProc("crashing worker", []string{"TOOLGATE_FAULT_CRASH_AFTER_COMMIT=refund"}, "--allow-auto-approve")

	const id = "crash-after-side-effect"
	s.start(id, workflows.RunInput{
		Goal:     "refund 5.00 on BK-1",
		Approval: workflows.PolicyAlwaysApprove,
		Planner:  scripted("refunded", step(call("refund", `{"booking_id":"BK-1","amount_cents":500}`))),
	})
	key := s.keyFor(id, "c-1", "refund", `{"booking_id":"BK-1","amount_cents":500}`)
	if err := crashing.wait(t, waitTimeout); !killedBySIGKILL(err) {
		t.Fatalf("crashing worker exit: %v, want killed by SIGKILL after the commit", err)
	}
	crashedAt := time.Now()
	pays, err := d.Payments(context.Background(), "BK-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(pays) != 1 || pays[0].IdempotencyKey != key || pays[0].AmountCents != 500 {
		t.Fatalf("payments of BK-1 after the crash: %+v, want the one payment under %s", pays, key)
	}

	s.startWorkerProc("worker 2", nil, "--allow-auto-approve")
	res := s.result(id, attemptTimeout+retryInterval+waitTimeout)
	t.Logf("the run completed %v after the crash", time.Since(crashedAt).Round(time.Millisecond))
	if res.Status != workflows.StatusCompleted {
		t.Fatalf("result %+v, want completed", res)
	}
	checkEvents(t, "result trace", res.Trace,
		event{"c-1", "refund", workflows.TraceApproved},
		event{"c-1", "refund", workflows.TraceOK},
	)
	ok := records(res.Trace, "c-1", workflows.TraceOK)[0]
	var refund desk.RefundResult
	if err := json.Unmarshal(ok.Result, &refund); err != nil {
		t.Fatalf("refund result %s: %v", ok.Result, err)
	}
	if refund.PaymentID != pays[0].ID || !refund.Duplicate || ok.Attempts < 2 {
		t.Fatalf("refund result %s after %d attempts, want the first payment %s reported as a duplicate by a retry",
			ok.Result, ok.Attempts, pays[0].ID)
	}

	after, err := d.Payments(context.Background(), "BK-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 1 || after[0].ID != pays[0].ID || after[0].IdempotencyKey != key {
		t.Fatalf("payments of BK-1 at the end: %+v, want exactly the one payment under %s", after, key)
	}
}

// killedBySIGKILL reports whether cmd.Wait's error says the process was
// killed by SIGKILL.
func killedBySIGKILL(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}
