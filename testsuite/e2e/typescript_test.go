package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/toolgate/toolgate/nexusserve"
	"github.com/toolgate/toolgate/remotetools"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// This file runs examples/typescript — written against Temporal's TypeScript
// SDK from npm, compiled here with its tsc and run with node — against the
// embedded server: TypeScript workflows that call toolgate through its Nexus
// service, and a TypeScript worker that hosts the tools of
// examples/tools-remote.yaml. The processes are killed with SIGKILL between
// a side effect and its answer, and while a call waits for a human.

// A TypeScript workflow (ticketAgent) calls toolgate's call operation: the
// same read twice (one activity; the second is answered from the memo) and
// the close, which waits for an operator. Meanwhile its worker is killed -9
// and started again; then the operator approves, and the workflow — replayed
// by the new worker — completes with the closed ticket, closed once.
func TestTypeScriptWorkflowCallsTheGateAcrossItsWorkersKill(t *testing.T) {
	ex := compileTSExample(t)
	s := newNexusStack(t)
	s.startWorker(false)
	s.startNexus(nil)
	first := ex.startCaller(s, "caller.js worker (first)")

	run := "ts-agent"
	id := nexusserve.RunID(run)
	wf := s.startTS("caller-"+run, "ticketAgent", run)
	s.awaitNext(id, waitTimeout, "gate:close_ticket")
	checkEvents(t, "the session run before the approval", s.mustTrace(id),
		event{"c-1", "search_tickets", "ok"}, event{"c-2", "search_tickets", "cache_hit"}, event{"c-3", "close_ticket", "blocked"})

	// The caller's worker dies while the close waits, and another starts.
	killAndWait(t, first)
	second := ex.startCaller(s, "caller.js worker (second)")

	st := s.mustState(id)
	if len(st.Interrupts) != 1 || st.Interrupts[0].CallID != "c-3" {
		t.Fatalf("interrupts %+v, want c-3's", st.Interrupts)
	}
	if _, err := s.approveByUpdate(id, workflows.DecisionInput{CallID: "c-3", Approver: "alice", ArgsDigest: st.Interrupts[0].ArgsDigest}); err != nil {
		t.Fatalf("approving the close: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	var outs []nexusserve.CallOutput
	if err := wf.Get(ctx, &outs); err != nil {
		t.Fatalf("the TypeScript workflow: %v", err)
	}

	var got []string
	closes := 0
	for _, o := range outs {
		got = append(got, fmt.Sprintf("%s %s %s", o.CallID, o.Tool, o.Status))
		if o.Run != id {
			t.Errorf("output %s names run %q, want %q", o.CallID, o.Run, id)
		}
		if o.Tool != "close_ticket" {
			continue
		}
		closes++
		var closed struct{ ID, Status string }
		if err := json.Unmarshal(o.Result, &closed); err != nil || o.Status != workflows.TraceOK || closed.ID != "TKT-3" || closed.Status != "closed" {
			t.Errorf("the close's output: %s %s (%v), want ok and TKT-3 closed", o.Status, o.Result, err)
		}
	}
	if want := []string{"c-1 search_tickets ok", "c-2 search_tickets cache_hit", "c-3 close_ticket ok"}; !equal(got, want) || closes != 1 {
		t.Fatalf("the workflow's outputs %q, want %q (the close once)", got, want)
	}
	if n := s.countActivities(id, "search_tickets"); n != 1 {
		t.Errorf("search_tickets ran %d times, want once (the second from the memo)", n)
	}
	if n := s.countActivities(id, "close_ticket"); n != 1 {
		t.Errorf("close_ticket ran %d times, want once", n)
	}
	if tk := s.ticket("TKT-3"); tk.Status != "closed" {
		t.Errorf("TKT-3 is %s on the desk", tk.Status)
	}
	tr := s.mustTrace(id)
	if ok := records(tr, "c-3", workflows.TraceOK); len(ok) != 1 || ok[0].Approver != "alice" {
		t.Errorf("c-3's ok records %+v, want one, approved by alice", ok)
	}
	if by, want := s.lastWorkflowTaskBy(wf.GetID()), fmt.Sprintf("%d@", second.cmd.Process.Pid); !strings.HasPrefix(by, want) {
		t.Errorf("the workflow's last task was completed by %q, want the second worker (%s…)", by, want)
	}
}

// tsPayment is a refund tools.ts paid (a file under REFUNDS_DIR/paid).
type tsPayment struct {
	RefundID       string  `json:"refund_id"`
	Order          string  `json:"order"`
	Amount         float64 `json:"amount"`
	CallID         string  `json:"call_id"`
	IdempotencyKey string  `json:"idempotency_key"`
	Approver       string  `json:"approver"`
}

// tsAttempt is an attempt tools.ts was given (a line of REFUNDS_DIR/attempts.jsonl).
type tsAttempt struct {
	CallID         string `json:"call_id"`
	IdempotencyKey string `json:"idempotency_key"`
	Attempt        int    `json:"attempt"`
	PID            int    `json:"pid"`
}

func readPayments(t *testing.T, dir string) []tsPayment {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "paid", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []tsPayment
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var p tsPayment
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("payment %s: %q: %v", f, b, err)
		}
		out = append(out, p)
	}
	return out
}

func readAttempts(t *testing.T, dir string) []tsAttempt {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "attempts.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []tsAttempt
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var a tsAttempt
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("attempts.jsonl line %q: %v", sc.Text(), err)
		}
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The tools of examples/tools-remote.yaml, hosted by tools.ts: refund_ts is
// declared destructive there, so a rejected refund never reaches the
// TypeScript worker; an approved one pays once though the worker is killed -9
// between paying and answering, and the retry — after the tool's timeout, on
// the worker started again — finds the payment made under the same key.
func TestTypeScriptToolPaysOnceAcrossItsWorkersKill(t *testing.T) {
	ex := compileTSExample(t)
	tools, err := remotetools.Load(filepath.Join("..", "..", "examples", "tools-remote.yaml"))
	if err != nil {
		t.Fatalf("examples/tools-remote.yaml: %v", err)
	}
	var names []string
	for i := range tools {
		sp := &tools[i].Spec
		names = append(names, sp.Name)
		if sp.TaskQueue != tsToolsQueue {
			t.Fatalf("%s is on task queue %q, want the example's %q", sp.Name, sp.TaskQueue, tsToolsQueue)
		}
		if sp.Name == "refund_ts" {
			if !sp.Destructive || sp.Activity != "refund_ts" {
				t.Fatalf("refund_ts declared destructive %v, activity %q; want destructive, activity refund_ts", sp.Destructive, sp.Activity)
			}
			// The file's 30s timeout, shortened: the retry comes after it.
			sp.Timeout, sp.Retry.InitialInterval = 5*time.Second, 200*time.Millisecond
		}
	}
	if want := []string{"refund_ts", "order_status_ts", "fx_rate_ts"}; !equal(names, want) {
		t.Fatalf("examples/tools-remote.yaml declares %q, want %q", names, want)
	}
	s := newNexusStack(t)
	s.startWorkerWith(func(o *worker.Options) { o.Tools = append(o.Tools, tools...) })

	refunds := t.TempDir()
	env := []string{"REFUNDS_DIR=" + refunds, "REFUND_HANG_AFTER_PAYING=1"}
	first := ex.startPolling(s, "tools.js (first)", tsToolsQueue, enumspb.TASK_QUEUE_TYPE_ACTIVITY, env, "tools.js")

	id := "ts-refunds"
	s.start(id, workflows.RunInput{Goal: "refund order O-2", Planner: scripted("refunded",
		step(call("refund_ts", `{"order":"O-1","amount":10}`)),
		step(call("refund_ts", `{"order":"O-2","amount":25.5}`)))})
	s.decideWaiting(id, "gate:refund_ts", "c-1", false)
	s.decideWaiting(id, "gate:refund_ts", "c-2", true)

	// c-2's first attempt pays and hangs: kill its worker -9 and start another.
	testenv.Eventually(t, waitTimeout, "the approved refund paid", func() error {
		if n := len(readPayments(t, refunds)); n == 0 {
			return errNotYet
		}
		return nil
	})
	killAndWait(t, first)
	if res, err := s.state(id); err != nil || res.Status == workflows.StatusCompleted {
		t.Fatalf("the run is %+v (%v) before the worker answered", res.Status, err)
	}
	second := ex.startPolling(s, "tools.js (second)", tsToolsQueue, enumspb.TASK_QUEUE_TYPE_ACTIVITY, env, "tools.js")

	res := s.result(id, 2*waitTimeout)
	checkEvents(t, "the refunds", res.Trace,
		event{"c-1", "refund_ts", "blocked"}, event{"c-1", "refund_ts", "rejected"},
		event{"c-2", "refund_ts", "blocked"}, event{"c-2", "refund_ts", "approved"}, event{"c-2", "refund_ts", "ok"})

	key := s.key(id, "c-2")
	pays := readPayments(t, refunds)
	if len(pays) != 1 {
		t.Fatalf("%d payments %+v, want one: the rejected call reached the worker, or the retry paid again", len(pays), pays)
	}
	pay := pays[0]
	if pay.IdempotencyKey != key || pay.CallID != "c-2" || pay.Order != "O-2" || pay.Amount != 25.5 || pay.Approver != "alice" {
		t.Fatalf("the payment %+v, want c-2's (O-2, 25.5, approved by alice) under its key %q", pay, key)
	}
	// Every attempt the workers were given is c-2's, under its key: the
	// first by the killed worker, the retry by the second.
	attempts := readAttempts(t, refunds)
	for _, a := range attempts {
		if a.CallID != "c-2" || a.IdempotencyKey != key {
			t.Fatalf("the worker was given %+v: only c-2 under key %q may reach it", a, key)
		}
	}
	if n := len(attempts); n < 2 || attempts[0].Attempt != 1 || attempts[0].PID != first.cmd.Process.Pid ||
		attempts[n-1].Attempt < 2 || attempts[n-1].PID != second.cmd.Process.Pid {
		t.Fatalf("attempts %+v, want the first by the killed worker (pid %d) and the last, a retry, by the second (pid %d)",
			attempts, first.cmd.Process.Pid, second.cmd.Process.Pid)
	}
	ok := records(res.Trace, "c-2", workflows.TraceOK)
	var out struct {
		RefundID string  `json:"refund_id"`
		Order    string  `json:"order"`
		Amount   float64 `json:"amount"`
		Status   string  `json:"status"`
	}
	if len(ok) != 1 {
		t.Fatalf("c-2's ok records: %+v", ok)
	}
	if err := json.Unmarshal(ok[0].Result, &out); err != nil || out.RefundID != pay.RefundID || out.Order != "O-2" || out.Status != "paid" {
		t.Fatalf("c-2's result %s (%v), want the payment %s the TypeScript worker made", ok[0].Result, err, pay.RefundID)
	}
}

// A TypeScript workflow (cancellableClose) cancels its call operation while
// the close waits for a human: toolgate withdraws the call — cancelled by
// (caller) in the session run's trace — the ticket stays open, an approval
// that comes after is refused, and the workflow says the call was withdrawn.
func TestTypeScriptCancelledOperationWithdrawsTheCall(t *testing.T) {
	ex := compileTSExample(t)
	s := newNexusStack(t)
	s.startWorker(false)
	s.startNexus(nil)
	ex.startCaller(s, "caller.js worker")

	run := "ts-cancel"
	id := nexusserve.RunID(run)
	wf := s.startTS("caller-"+run, "cancellableClose", run)
	s.awaitNext(id, waitTimeout, "gate:close_ticket")
	digest := s.mustState(id).Interrupts[0].ArgsDigest
	s.signal(wf.GetID(), "cancel", nil)

	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	var got struct {
		Withdrawn bool                   `json:"withdrawn"`
		Output    *nexusserve.CallOutput `json:"output"`
		Error     string                 `json:"error"`
	}
	if err := wf.Get(ctx, &got); err != nil {
		t.Fatalf("the TypeScript workflow: %v", err)
	}
	if !got.Withdrawn || got.Output != nil || !strings.Contains(got.Error, "CancelledFailure") {
		t.Fatalf("the workflow reports %+v, want its operation cancelled and the close withdrawn", got)
	}
	testenv.Eventually(t, waitTimeout, "c-1 cancelled by "+workflows.WithdrawnBy, func() error {
		if r := records(s.mustTrace(id), "c-1", workflows.TraceCancelled); len(r) == 1 && r[0].Approver == workflows.WithdrawnBy {
			return nil
		}
		return fmt.Errorf("trace %v", events(s.mustTrace(id)))
	})
	if _, err := s.approveByUpdate(id, workflows.DecisionInput{CallID: "c-1", Approver: "alice", ArgsDigest: digest}); err == nil {
		t.Fatal("an approval of the withdrawn close was taken")
	}
	checkEvents(t, "the session run", s.mustTrace(id), event{"c-1", "close_ticket", "blocked"}, event{"c-1", "close_ticket", "cancelled"})
	if n := s.countActivities(id, "close_ticket"); n != 0 {
		t.Errorf("close_ticket ran %d times, want never", n)
	}
	if tk := s.ticket("TKT-3"); tk.Status != "open" {
		t.Fatalf("TKT-3 is %s: the withdrawn close ran", tk.Status)
	}
}
