package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/nexusserve"
	"github.com/toolgate/toolgate/permit"
	"github.com/toolgate/toolgate/remotetools"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// This file runs examples/typescript — written against Temporal's TypeScript
// SDK from npm, compiled here with its tsc and run with node — against the
// embedded server: TypeScript workflows that call toolgate through its Nexus
// service, and a TypeScript worker that hosts the tools of
// examples/tools-remote.yaml, checking each request's permit
// (examples/typescript/src/permit.ts) against the gate's DATA/worker.pub.
// The processes are killed with SIGKILL between a side effect and its
// answer, and while a call waits for a human.

// A TypeScript workflow (ticketAgent) calls toolgate's call operation: the
// same read twice (one activity; the second is answered from the memo) and
// the close, which waits for an operator. Meanwhile its worker is killed -9
// and started again; then the operator approves, and the workflow — replayed
// by the new worker — completes with the closed ticket, closed once.
func TestTypeScriptWorkflowCallsTheGateAcrossItsWorkersKill(t *testing.T) {
	longSuite(t)
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
	longSuite(t)
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
	env := []string{"REFUNDS_DIR=" + refunds, "REFUND_HANG_AFTER_PAYING=1", "TOOLGATE_WORKER_PUB=" + s.workerPub()}
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

// digestCases are arguments whose canonical JSON is easy to get wrong:
// nesting, key order by UTF-16 code units (a supplementary character before
// U+FFFF), integer-like keys, numbers in every layout, escapes. Each is sent
// as toolgate sends arguments: in Go's canonical form.
var digestCases = []string{
	``,
	`{}`,
	`{"b":{"d":1,"c":[3,{"z":0,"a":"x"}]},"a":null,"e":[],"f":{}}`,
	`{"é":1,"e":2,"😀":3,"\uffff":4,"ｚ":5,"a\u0301":6,"\u00e8":7,"Z":8,"":9}`,
	`{"10":1,"2":2,"1":3,"-1":4,"01":5,"1.0":6,"b":7,"B":8}`,
	`{"n":[1.0,1e21,1e20,-0,-0.0,0e10,0.1,1e-7,0.000001,123e18,-1.5e-10,100,1E+2,25.5,5e-324,1.7976931348623157e308,4.35,1e-6,123456789012345680000]}`,
	`{"s":"\u0000\u001f\"\\\/\b\f\n\r\t\u2028\u007f é \ud83d\ude00 <>&","t":true,"f":false}`,
	`[3,"2",{"y":[{"b":1,"a":2}]},null]`,
	`"just a string"`,
	`null`,
	`{"order":"O-2","amount":25.5}`,
	strings.Repeat(`{"a":[`, 60) + `1` + strings.Repeat(`]}`, 60),
}

// lossyCases hold numbers a JavaScript number cannot hold exactly: the
// TypeScript host sees other arguments than the ones a gate let through, so
// its digest differs (or it cannot make one) and the permit is refused.
var lossyCases = []string{
	`{"n":123456789012345678901}`,
	`{"n":0.30000000000000001}`,
	`{"n":12345678901234567891}`,
	`{"n":1e400}`,
}

// The TypeScript host's argument digest (permit.ts: argsDigest, of the
// arguments as the SDK's JSON decoding makes them) is tool.Digest's, byte for
// byte, on every case but a number JavaScript cannot hold.
func TestTypeScriptPermitDigestsMatchGo(t *testing.T) {
	ex := compileTSExample(t)
	type digestCase struct {
		Tool string `json:"tool"`
		Args string `json:"args"`
	}
	var in []digestCase
	var want []string
	for _, args := range append(slices.Clone(digestCases), lossyCases...) {
		d, err := tool.Digest("refund_ts", json.RawMessage(args))
		if err != nil {
			t.Fatalf("tool.Digest(%s): %v", args, err)
		}
		canon := ""
		if args != "" {
			c, err := tool.Canonical(json.RawMessage(args))
			if err != nil {
				t.Fatal(err)
			}
			canon = string(c)
		}
		in = append(in, digestCase{Tool: "refund_ts", Args: canon})
		want = append(want, d)
	}
	script := filepath.Join(ex.dir, "digests.js")
	if err := os.WriteFile(script, []byte(`const { argsDigest } = require('./lib/permit');
const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify(cases.map(({ tool, args }) => {
  try { return argsDigest(tool, args === '' ? undefined : JSON.parse(args)); } catch (err) { return 'error: ' + err.message; }
})));
`), 0o644); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", script)
	cmd.Dir = ex.dir
	cmd.Env = childEnv()
	cmd.Stdin = bytes.NewReader(raw)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node digests.js: %v", err)
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(want) {
		t.Fatalf("node digests.js printed %s (%v), want %d digests", out, err, len(want))
	}
	for i := range digestCases {
		if got[i] != want[i] {
			t.Errorf("args %s (sent as %s): TypeScript's digest %s, Go's %s", digestCases[i], in[i].Args, got[i], want[i])
		}
	}
	for i, args := range lossyCases {
		if j := len(digestCases) + i; got[j] == want[j] {
			t.Errorf("args %s: TypeScript's digest equals Go's, though a JavaScript number cannot hold it", args)
		}
	}
}

// The attacker — a Temporal client of the namespace, no worker key — runs a
// workflow of its own that schedules refund_ts on the TypeScript worker's task
// queue: without a permit; with one it signed itself for that very activity
// (naming its own key, then the gate's); with the permit of a real run's
// approved refund copied out of its history, as it was and with other
// arguments. tools.ts (given the gate's DATA/worker.pub) refuses each with
// PermitRefused before refund_ts runs, and pays the real run's refund only.
func TestTypeScriptToolRefusesACallNoGateLetThrough(t *testing.T) {
	ex := compileTSExample(t)
	tools, err := remotetools.Load(filepath.Join("..", "..", "examples", "tools-remote.yaml"))
	if err != nil {
		t.Fatalf("examples/tools-remote.yaml: %v", err)
	}
	s := newStack(t)
	s.startWorkerWith(func(o *worker.Options) { o.Tools = append(o.Tools, tools...) })
	refunds := t.TempDir()
	ex.startPolling(s, "tools.js", tsToolsQueue, enumspb.TASK_QUEUE_TYPE_ACTIVITY,
		[]string{"REFUNDS_DIR=" + refunds, "TOOLGATE_WORKER_PUB=" + s.workerPub()}, "tools.js")
	s.startHostAttacker()

	req := tool.Request{CallID: "c-1", IdempotencyKey: "mine/c-1", Args: json.RawMessage(`{"amount":500,"order":"O-9"}`),
		Approval: &tool.Approval{Approver: "alice", Kind: tool.ApprovedAtGate}}
	attack := func(id string, a hostAttack, want string) {
		t.Helper()
		a.Queue, a.Activity = tsToolsQueue, "refund_ts"
		requirePermitRefused(t, s.runHostAttack(id, a), want)
	}
	attack("attack-ts-none", hostAttack{Req: req}, "carries no permit")
	_, mallory, err := signed.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	attack("attack-ts-forged", hostAttack{Req: req, ForgeKey: mallory}, "not one this worker trusts")
	attack("attack-ts-forged-kid", hostAttack{Req: req, ForgeKey: mallory, ForgeKid: s.workerKeyID()}, "bad permit signature")

	// A real run's approved refund is paid, with its permit.
	id := "ts-permit-real"
	s.start(id, workflows.RunInput{Goal: "refund order O-1", Planner: scripted("refunded", step(call("refund_ts", `{"order":"O-1","amount":10}`)))})
	s.decideWaiting(id, "gate:refund_ts", "c-1", true)
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("the real run: %+v", res)
	}
	copied := s.scheduledRequest(id, "c-1")
	if copied.Permit == "" {
		t.Fatal("the real run's refund carries no permit")
	}
	// tools.ts claimed the refund's permit on the server: another activity's
	// claim of it is refused.
	keys, err := permit.ReadPublicKeys(s.workerPub())
	if err != nil {
		t.Fatal(err)
	}
	claims, err := permit.Verify(copied.Permit, keys)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	d, err := s.client.DescribeWorkflowExecution(ctx, permit.ClaimPrefix+claims.ID, "")
	if err != nil {
		t.Fatalf("tools.ts did not claim the refund's permit: %v", err)
	}
	if tq := d.GetExecutionConfig().GetTaskQueue().GetName(); d.GetWorkflowExecutionInfo().GetType().GetName() != permit.MarkerWorkflow || tq != permit.ClaimQueue {
		t.Fatalf("the claim is a %s on %s, want %s on %s", d.GetWorkflowExecutionInfo().GetType().GetName(), tq, permit.MarkerWorkflow, permit.ClaimQueue)
	}
	claimer := permit.TemporalClaimer{Client: s.client, Namespace: devserver.DefaultNamespace}
	if err := claimer.Claim(ctx, claims, "another/activity@1"); !errors.Is(err, permit.ErrUsed) {
		t.Fatalf("another activity claimed the permit tools.ts used: %v", err)
	}
	attack("attack-ts-copy", hostAttack{Req: copied}, `its workflow is "ts-permit-real"`)
	copied.Args = json.RawMessage(`{"amount":500,"order":"O-9"}`)
	attack("attack-ts-copy-edited", hostAttack{Req: copied}, `its workflow is "ts-permit-real"`)

	key := s.key(id, "c-1")
	if pays := readPayments(t, refunds); len(pays) != 1 || pays[0].IdempotencyKey != key || pays[0].Order != "O-1" {
		t.Fatalf("payments %+v, want the real run's refund only (O-1 under %q)", pays, key)
	}
	for _, a := range readAttempts(t, refunds) {
		if a.CallID != "c-1" || a.IdempotencyKey != key {
			t.Fatalf("refund_ts was given %+v: only the real run's c-1 (key %q) may reach it", a, key)
		}
	}
}

// permit.ts verifies what Go's permit package signs, and refuses what Go's
// refuses, for the same reason; its claims are Go's, field by field. Its
// claim (temporalClaimer, over the NativeConnection a worker's activities
// use) is the Go claimer's on the same server: the same claimant may claim
// again, another is refused — in either language.
func TestTypeScriptPermitVerifiesAndClaimsAsGo(t *testing.T) {
	ex := compileTSExample(t)
	s := newStack(t)
	_, k, err := signed.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := signed.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pubFile := filepath.Join(t.TempDir(), permit.WorkerPublicKeyFile)
	if err := os.WriteFile(pubFile, []byte("# the gate's\n"+signed.FormatPublicKey(k.Public().(ed25519.PublicKey))+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := permit.Claims{ID: permit.IDFor("wf", "run", "c-1"), WorkflowID: "wf", RunID: "run", ActivityID: "c-1", Activity: "refund_ts",
		TaskQueue: tsToolsQueue, CallID: "c-1", Tool: "refund_ts", ArgsDigest: strings.Repeat("ab", 32), Key: "wf/chain/c-1",
		Destructive: true, Approver: "alice", Kind: "gate", Rules: "r", IssuedAt: 7}
	good, err := permit.Sign(k, c)
	if err != nil {
		t.Fatal(err)
	}
	read := c
	read.Destructive, read.Approver, read.Kind = false, "", ""
	goodRead, err := permit.Sign(k, read)
	if err != nil {
		t.Fatal(err)
	}
	unknown, err := permit.Sign(other, c)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString(bytes.Replace(payload, []byte(`"alice"`), []byte(`"mallory"`), 1)) + "." + parts[2]
	approverTok, err := signed.Sign(k, signed.Claims{Approver: "alice", WorkflowID: "wf", Action: signed.ActionApprove, IssuedAt: 1, Expiry: 2})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, token, want string }{
		{"good", good, "ok"},
		{"a read's", goodRead, "ok"},
		{"none", "", "missing"},
		{"another worker's key", unknown, "unknown-key"},
		{"a forged payload", forged, "bad-signature"},
		{"an approver's token", approverTok, "malformed"},
		{"not compact", "abc", "malformed"},
		{"padded", parts[0] + "." + parts[1] + "." + parts[2] + "==", "malformed"},
	}
	for _, tc := range cases {
		_, err := permit.Verify(tc.token, permit.NewKeys(k.Public().(ed25519.PublicKey)))
		if (err == nil) != (tc.want == "ok") {
			t.Fatalf("Go's Verify of %s: %v", tc.name, err)
		}
	}

	script := filepath.Join(ex.dir, "permits.js")
	if err := os.WriteFile(script, []byte(`const permit = require('./lib/permit');
const { readPublicKeys, verifyPermit, temporalClaimer, PermitError } = permit;
const { NativeConnection } = require('@temporalio/worker');
const { Client } = require('@temporalio/client');
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const reason = (err) => (err instanceof PermitError ? err.reason : 'error: ' + err.message);
(async () => {
  const keys = readPublicKeys(input.pub);
  const verified = input.tokens.map((tok) => { try { return verifyPermit(tok, keys); } catch (err) { return reason(err); } });
  const connection = await NativeConnection.connect({ address: input.address });
  const claim = temporalClaimer({ client: new Client({ connection, namespace: input.namespace }), namespace: input.namespace });
  const claims = [];
  for (const [jti, claimant] of input.claims) {
    try { await claim({ jti, wid: 'wf', call: 'c-1' }, claimant); claims.push('ok'); } catch (err) { claims.push(reason(err)); }
  }
  await connection.close();
  const constants = [permit.PERMIT_TYPE, permit.PERMIT_VERSION, permit.PERMIT_MAX_BYTES, permit.REFUSED, permit.REFUSED_RETRY,
    permit.CLAIM_PREFIX, permit.MARKER_WORKFLOW, permit.CLAIM_QUEUE, permit.CLAIM_TIMEOUT_SECONDS].map(String);
  process.stdout.write(JSON.stringify({ verified, claims, constants }));
})().catch((err) => { console.error(err); process.exit(1); });
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// Go claims jti2 first; TypeScript claims c's permit, again, as another,
	// then jti2 as another.
	jti2 := permit.IDFor("wf", "run", "c-2")
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	goClaimer := permit.TemporalClaimer{Client: s.client, Namespace: devserver.DefaultNamespace}
	if err := goClaimer.Claim(ctx, permit.Claims{ID: jti2, WorkflowID: "wf", CallID: "c-2"}, "go/activity@1"); err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for _, tc := range cases {
		tokens = append(tokens, tc.token)
	}
	raw, err := json.Marshal(map[string]any{"pub": pubFile, "tokens": tokens, "address": s.address(), "namespace": devserver.DefaultNamespace,
		"claims": [][2]string{{c.ID, "wf/run/c-1@1"}, {c.ID, "wf/run/c-1@1"}, {c.ID, "wf/run/c-1@2"}, {jti2, "ts/activity@1"}}})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", script)
	cmd.Dir = ex.dir
	cmd.Env = childEnv()
	cmd.Stdin = bytes.NewReader(raw)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node permits.js: %v\n%s", err, stderr.String())
	}
	var got struct {
		Verified  []json.RawMessage `json:"verified"`
		Claims    []string          `json:"claims"`
		Constants []string          `json:"constants"`
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got.Verified) != len(cases) {
		t.Fatalf("node permits.js printed %s (%v)", out, err)
	}
	for i, tc := range cases {
		if tc.want != "ok" {
			var reason string
			if err := json.Unmarshal(got.Verified[i], &reason); err != nil || reason != tc.want {
				t.Errorf("%s: permit.ts says %s, want %s", tc.name, got.Verified[i], tc.want)
			}
			continue
		}
		var claims permit.Claims
		if err := json.Unmarshal(got.Verified[i], &claims); err != nil {
			t.Fatalf("%s: permit.ts refused it: %s", tc.name, got.Verified[i])
		}
		want, err := permit.Verify(tc.token, permit.NewKeys(k.Public().(ed25519.PublicKey)))
		if err != nil || claims != want {
			t.Errorf("%s: permit.ts read %+v, Go %+v (%v)", tc.name, claims, want, err)
		}
	}
	if want := []string{permit.Type, fmt.Sprint(permit.Version), fmt.Sprint(permit.MaxBytes), permit.Refused, permit.RetryType,
		permit.ClaimPrefix, permit.MarkerWorkflow, permit.ClaimQueue, fmt.Sprint(int(permit.ClaimTimeout / time.Second))}; !equal(got.Constants, want) {
		t.Errorf("permit.ts's constants %q, Go's %q", got.Constants, want)
	}
	if want := []string{"ok", "ok", "used", "used"}; !equal(got.Claims, want) {
		t.Errorf("permit.ts's claims: %q, want %q", got.Claims, want)
	}
	if err := goClaimer.Claim(ctx, c, "go/another@1"); !errors.Is(err, permit.ErrUsed) {
		t.Errorf("Go claimed the permit permit.ts claimed, as another activity: %v", err)
	}
}
