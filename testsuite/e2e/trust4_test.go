package e2e

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/demo"
	"github.com/toolgate/toolgate/permit"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// The trust boundary's fourth pass (issue 43) on the real server: a tool
// runs only for a call a gate let through, checked where the effect
// happens. The attacker holds a Temporal client of the namespace and no
// toolgate key: it schedules tools' activities from a workflow of its own,
// copies a permit out of a run's history, and runs a worker of its own that
// answers runs' workflow tasks.

// attackQueue is the attacker's own task queue.
const attackQueue = "attacker"

// attack is the attacker's workflow: it schedules activityType on the
// toolgate workers' task queue with req, once.
func attack(ctx workflow.Context, activityType string, req tool.Request) (json.RawMessage, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: workflows.TaskQueue, ActivityID: req.CallID, StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var out json.RawMessage
	err := workflow.ExecuteActivity(ctx, activityType, req).Get(ctx, &out)
	return out, err
}

// startAttacker starts the attacker's worker on its own task queue.
func (s *stack) startAttacker() {
	s.t.Helper()
	w := sdkworker.New(s.client, attackQueue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(attack, workflow.RegisterOptions{Name: "attack"})
	if err := w.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(w.Stop)
}

// runAttack runs the attack workflow and returns the activity's failure.
func (s *stack) runAttack(id, activityType string, req tool.Request) error {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	run, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: attackQueue}, "attack", activityType, req)
	if err != nil {
		s.t.Fatal(err)
	}
	var out json.RawMessage
	if err := run.Get(ctx, &out); err != nil {
		return err
	}
	s.t.Fatalf("%s ran for the attacker: %s", activityType, out)
	return nil
}

// requirePermitRefused checks err is the activity's refusal for want of a
// valid permit, saying want.
func requirePermitRefused(t *testing.T, err error, want string) {
	t.Helper()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != permit.Refused {
		t.Fatalf("want the activity refused (%s), got %v", permit.Refused, err)
	}
	if !strings.Contains(appErr.Message(), want) {
		t.Fatalf("the refusal %q does not say %q", appErr.Message(), want)
	}
}

// scheduledRequest is the tool.Request of the activity callID of run id, as
// its history holds it: what anyone who may read the run can copy.
func (s *stack) scheduledRequest(id, callID string) tool.Request {
	s.t.Helper()
	for _, ev := range s.history(id, "").GetEvents() {
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil || a.GetActivityId() != callID {
			continue
		}
		var req tool.Request
		if err := converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &req); err != nil {
			s.t.Fatal(err)
		}
		return req
	}
	s.t.Fatalf("no activity %s in %s's history", callID, id)
	return tool.Request{}
}

// Item 1: anyone could run a destructive tool with no decision at all, by
// scheduling its activity from a workflow of their own; and a read, and a
// close with a permit copied out of a run that closed another ticket.
func TestAToolRunsOnlyForACallAGateLetThrough(t *testing.T) {
	s := newStack(t)
	s.startWorker(false)
	s.startAttacker()

	err := s.runAttack("attack-close", "close_ticket", tool.Request{CallID: "c-1", IdempotencyKey: "mine/c-1", Args: json.RawMessage(`{"ticket_id":"TKT-3"}`),
		Approval: &tool.Approval{Approver: "alice", Kind: tool.ApprovedAtGate}})
	requirePermitRefused(t, err, "carries no permit")
	err = s.runAttack("attack-read", "search_tickets", tool.Request{CallID: "c-1", IdempotencyKey: "mine/c-1", Args: json.RawMessage(`{"query":"login"}`)})
	requirePermitRefused(t, err, "carries no permit")

	// A real run closes TKT-2 with alice's approval; its permit is in its history.
	id := "trust4-real"
	s.start(id, workflows.RunInput{Goal: "close TKT-2", Planner: scripted("done", step(call("close_ticket", `{"ticket_id":"TKT-2"}`)))})
	s.awaitNext(id, waitTimeout, "gate:close_ticket")
	s.decideWaiting(id, "gate:close_ticket", "c-1", true)
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("the real run: %+v", res)
	}
	copied := s.scheduledRequest(id, "c-1")
	if copied.Permit == "" {
		t.Fatal("the real run's close carries no permit")
	}
	// The copy, as it was, and with TKT-3 in place of TKT-2.
	err = s.runAttack("attack-copy", "close_ticket", copied)
	requirePermitRefused(t, err, "its workflow is \"trust4-real\"")
	copied.Args = json.RawMessage(`{"ticket_id":"TKT-3"}`)
	err = s.runAttack("attack-copy-edited", "close_ticket", copied)
	requirePermitRefused(t, err, "its workflow is \"trust4-real\"")

	if got := s.ticket("TKT-3").Status; got == "closed" {
		t.Fatal("TKT-3 was closed for the attacker")
	}
	if got := s.ticket("TKT-2").Status; got != "closed" {
		t.Fatalf("TKT-2 is %q: the real run's approved close did not run", got)
	}
}

// rogueRegistry registers what worker.Register gives it, but no tool's
// activity: the attacker's worker answers runs' workflow tasks and leaves the
// tools to the real worker, which alone can reach the desk.
type rogueRegistry struct {
	sdkworker.Worker
	tools map[string]bool
}

func (r rogueRegistry) RegisterActivityWithOptions(a any, o activity.RegisterOptions) {
	if !r.tools[o.Name] {
		r.Worker.RegisterActivityWithOptions(a, o)
	}
}

// startRogue starts the attacker's toolgate worker on the workers' task
// queue: the desk's tools declared as the real worker declares them, a
// policy in which "alice" holds mallory's key, and a worker key of its own.
func (s *stack) startRogue(mallory ed25519.PrivateKey) sdkworker.Worker {
	s.t.Helper()
	opts, d, err := demo.OptionsWithDesk(s.t.TempDir(), "")
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = d.Close() })
	opts.Policy, opts.SearchAttributes = trust4Policy(s.t, mallory.Public().(ed25519.PublicKey)), true
	_, opts.WorkerKey, err = signed.GenerateKey()
	if err != nil {
		s.t.Fatal(err)
	}
	// Workflow tasks and local activities only: an activity task of a tool
	// it does not host, taken here, would fail with "unable to find
	// activityType" before the real worker could refuse its permit (the
	// test failed so, now and then, when the rogue won the poll).
	w := sdkworker.New(s.client, workflows.TaskQueue, sdkworker.Options{LocalActivityWorkerOnly: true})
	tools := map[string]bool{}
	for _, tl := range opts.Tools {
		tools[tl.Spec.Name] = true
	}
	if err := worker.Register(rogueRegistry{Worker: w, tools: tools}, opts); err != nil {
		s.t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(w.Stop)
	return w
}

// startToolsOnly starts the real worker's tools (its policy and worker key)
// but no workflow worker: every workflow task goes to whoever else polls.
func (s *stack) startToolsOnly(k keyring) {
	s.t.Helper()
	opts, d, err := demo.OptionsWithDesk(s.dataDir, "")
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = d.Close() })
	opts.Policy, opts.SearchAttributes = trust4Policy(s.t, k["alice"].Public().(ed25519.PublicKey)), true
	w := sdkworker.New(s.client, workflows.TaskQueue, sdkworker.Options{DisableWorkflowWorker: true})
	if err := worker.Register(activitiesOnly{w}, opts); err != nil {
		s.t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(w.Stop)
}

// activitiesOnly registers activities, and no workflow (a worker whose
// workflow worker is disabled refuses them).
type activitiesOnly struct{ sdkworker.Worker }

func (activitiesOnly) RegisterWorkflowWithOptions(any, workflow.RegisterOptions) {}

// trust4Policy: alice, whose key is alice, closes tickets.
func trust4Policy(t *testing.T, alice ed25519.PublicKey) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(fmt.Sprintf("approvers:\n  alice: {key: %q, roles: [support]}\ntools:\n  close_ticket: {approvers: {roles: [support]}}\n",
		signed.FormatPublicKey(alice))))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// closeTKT4 starts run id, which closes TKT-4, and waits until c-1 waits.
func (s *stack) closeTKT4(id string) {
	s.t.Helper()
	s.start(id, workflows.RunInput{Goal: "close TKT-4", Planner: scripted("done", step(call("close_ticket", `{"ticket_id":"TKT-4"}`)))})
	s.awaitCalls(id, "c-1")
}

// errorOf is c-1's error in the run's trace once it ended.
func (s *stack) errorOf(id, callID string) string {
	s.t.Helper()
	res := s.result(id, waitTimeout)
	for _, r := range res.Trace {
		if r.CallID == callID && r.Status == workflows.TraceError {
			return r.Error
		}
	}
	s.t.Fatalf("%s of %s did not fail: %+v", callID, id, res.Trace)
	return ""
}

// Item 2: whoever answered a run's first workflow task wrote the policy it
// was held to. Mallory's worker answers it (recording a policy in which
// alice holds mallory's key) and stops; the real worker takes the run up,
// and mallory's approval "as alice" is taken by the recorded policy — but
// the worker signs no permit for rules that are not its own, so the close
// never runs.
func TestARunsRulesAreTheWorkers(t *testing.T) {
	s := newStack(t)
	k := newKeyring(t, "alice", "mallory")
	rogue := s.startRogue(k["mallory"])
	id := "trust4-rules"
	s.closeTKT4(id)
	rogue.Stop()
	s.startWorkerWith(func(o *worker.Options) { o.Policy = trust4Policy(t, k["alice"].Public().(ed25519.PublicKey)) })
	s.signedDecide(id, keyring{"alice": k["mallory"]}, "alice", true, "c-1")
	if msg := s.errorOf(id, "c-1"); !strings.Contains(msg, "differ from this worker's own") {
		t.Fatalf("c-1 failed, but not for its rules: %s", msg)
	}
	if got := s.ticket("TKT-4").Status; got == "closed" {
		t.Fatal("TKT-4 was closed on mallory's approval")
	}
}

// Item 3: mallory's worker answers every workflow task of a run, takes her
// own approval "as alice" and schedules the close with alice's name on it,
// byte for byte the request of a real approval — with a permit signed by a
// key no real worker trusts. The real worker, which alone hosts the tools,
// refuses it.
func TestARogueWorkersPermitIsRefused(t *testing.T) {
	s := newStack(t)
	k := newKeyring(t, "alice", "mallory")
	s.startToolsOnly(k)
	s.startRogue(k["mallory"])
	id := "trust4-rogue"
	s.closeTKT4(id)
	s.signedDecide(id, keyring{"alice": k["mallory"]}, "alice", true, "c-1")
	if msg := s.errorOf(id, "c-1"); !strings.Contains(msg, "not one this worker trusts") {
		t.Fatalf("c-1 failed, but not for its permit's key: %s", msg)
	}
	if got := s.ticket("TKT-4").Status; got == "closed" {
		t.Fatal("TKT-4 was closed on mallory's approval")
	}
}

// A destructive permit's claim on the server: the same activity (a retry,
// after the marker closed) takes it again; any other is refused.
func TestAPermitIsClaimedOnceOnTheServer(t *testing.T) {
	longSuite(t)
	s := newStack(t)
	cl := permit.TemporalClaimer{Client: s.client, Namespace: s.server.Namespace()}
	c := permit.Claims{ID: permit.IDFor("wf", "run", "c-1"), WorkflowID: "wf", CallID: "c-1"}
	ctx := rewindCtx(t)
	if err := cl.Claim(ctx, c, "wf/run/c-1@1"); err != nil {
		t.Fatal(err)
	}
	// Wait for the marker to close: nothing polls its queue, and it times
	// out after permit.ClaimTimeout.
	deadline := time.Now().Add(waitTimeout + permit.ClaimTimeout)
	for {
		d, err := s.client.DescribeWorkflowExecution(ctx, permit.ClaimPrefix+c.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the claim's marker never closed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cl.Claim(ctx, c, "wf/run/c-1@1"); err != nil {
		t.Fatalf("the same activity's second attempt: %v", err)
	}
	if err := cl.Claim(ctx, c, "wf/run/c-1@2"); !errors.Is(err, permit.ErrUsed) {
		t.Fatalf("another activity claimed a used permit: %v", err)
	}
}
