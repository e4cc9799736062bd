package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/nexusserve"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// nexusEndpoint is the endpoint the Nexus tests create: the name an operator
// gives it (here, and in examples/typescript).
const nexusEndpoint = "toolgate"

// startNexus starts the worker that hosts the toolgate Nexus service (on
// nexusserve.TaskQueue, speaking to the runs of workflows.TaskQueue through
// the stack's client) and creates the endpoint that routes to it.
func (s *stack) startNexus(edit func(*nexusserve.Options)) sdkworker.Worker {
	t := s.t
	t.Helper()
	o := nexusserve.Options{Runs: s.tg}
	if edit != nil {
		edit(&o)
	}
	w, err := nexusserve.Start(s.client, "", o)
	if err != nil {
		t.Fatalf("starting the Nexus service's worker: %v", err)
	}
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	if _, err := nexusserve.CreateEndpoint(ctx, s.client, nexusEndpoint, "default", nexusserve.TaskQueue); err != nil {
		t.Fatalf("creating the Nexus endpoint: %v", err)
	}
	return w
}

// goCallerQueue is the task queue of the Go caller's workflows.
const goCallerQueue = "e2e-nexus-caller"

// nexusCaller is a workflow of another team, in Go: it calls toolgate's
// call operation for each input in turn and returns the outputs.
func nexusCaller(ctx workflow.Context, ins []nexusserve.CallInput) ([]nexusserve.CallOutput, error) {
	c := workflow.NewNexusClient(nexusEndpoint, nexusserve.ServiceName)
	var outs []nexusserve.CallOutput
	for _, in := range ins {
		var out nexusserve.CallOutput
		f := c.ExecuteOperation(ctx, nexusserve.OperationCall, in, workflow.NexusOperationOptions{ScheduleToCloseTimeout: time.Hour})
		if err := f.Get(ctx, &out); err != nil {
			return outs, err
		}
		outs = append(outs, out)
	}
	return outs, nil
}

// nexusCallerRaw calls toolgate's call operation with in as it is.
func nexusCallerRaw(ctx workflow.Context, in json.RawMessage) (nexusserve.CallOutput, error) {
	c := workflow.NewNexusClient(nexusEndpoint, nexusserve.ServiceName)
	var out nexusserve.CallOutput
	err := c.ExecuteOperation(ctx, nexusserve.OperationCall, in, workflow.NexusOperationOptions{ScheduleToCloseTimeout: time.Hour}).Get(ctx, &out)
	return out, err
}

// nexusRunner calls toolgate's run operation.
func nexusRunner(ctx workflow.Context, req nexusserve.RunRequest) (workflows.RunResult, error) {
	c := workflow.NewNexusClient(nexusEndpoint, nexusserve.ServiceName)
	var res workflows.RunResult
	err := c.ExecuteOperation(ctx, nexusserve.OperationRun, req, workflow.NexusOperationOptions{ScheduleToCloseTimeout: time.Hour}).Get(ctx, &res)
	return res, err
}

// startGoCaller starts the Go caller's worker.
func (s *stack) startGoCaller() sdkworker.Worker {
	s.t.Helper()
	w := sdkworker.New(s.client, goCallerQueue, sdkworker.Options{})
	w.RegisterWorkflow(nexusCaller)
	w.RegisterWorkflow(nexusRunner)
	w.RegisterWorkflowWithOptions(nexusCallerRaw, workflow.RegisterOptions{Name: "nexusCallerRaw"})
	if err := w.Start(); err != nil {
		s.t.Fatalf("starting the caller's worker: %v", err)
	}
	s.t.Cleanup(w.Stop)
	return w
}

func (s *stack) executeCaller(id string, wf any, arg any) client.WorkflowRun {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	run, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: goCallerQueue}, wf, arg)
	if err != nil {
		s.t.Fatalf("starting %s: %v", id, err)
	}
	return run
}

// A workflow of another team calls the gate through Nexus: a read twice (one
// activity, the second from the memo) and a close that waits for an
// operator's approval; it gets the closed ticket once. A call of an unknown
// run name, or with a field the input does not have, fails at once, saying
// why. The run operation starts a run and completes with its result.
func TestNexusCallThroughTheGate(t *testing.T) {
	s := newNexusStack(t)
	s.startWorker(false)
	s.startNexus(nil)
	s.startGoCaller()

	search := nexusserve.CallInput{Run: "go-agent", Tool: "search_tickets", Args: json.RawMessage(`{"query":"login"}`)}
	closeIt := nexusserve.CallInput{Run: "go-agent", Tool: "close_ticket", Args: json.RawMessage(`{"ticket_id":"TKT-3"}`), Key: "close-TKT-3"}
	run := s.executeCaller("go-caller-1", nexusCaller, []nexusserve.CallInput{search, search, closeIt})
	id := nexusserve.RunID("go-agent")
	s.awaitNext(id, waitTimeout, "gate:close_ticket")
	st := s.mustState(id)
	if _, err := s.approveByUpdate(id, workflows.DecisionInput{CallID: st.Interrupts[0].CallID, Approver: "alice", ArgsDigest: st.Interrupts[0].ArgsDigest}); err != nil {
		t.Fatalf("approving the close: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	var outs []nexusserve.CallOutput
	if err := run.Get(ctx, &outs); err != nil {
		t.Fatalf("the caller's workflow: %v", err)
	}
	want := []string{"c-1 search_tickets ok", "c-2 search_tickets cache_hit", "c-3 close_ticket ok"}
	for i, o := range outs {
		if got := fmt.Sprintf("%s %s %s", o.CallID, o.Tool, o.Status); i >= len(want) || got != want[i] {
			t.Errorf("output %d: %s, want %q", i, got, want)
		}
		if o.Run != id {
			t.Errorf("output %d names run %q, want %q", i, o.Run, id)
		}
	}
	if len(outs) != 3 || string(outs[2].Result) == "" {
		t.Fatalf("outputs %+v", outs)
	}
	var closed struct{ ID, Status string }
	if err := json.Unmarshal(outs[2].Result, &closed); err != nil || closed.ID != "TKT-3" || closed.Status != "closed" {
		t.Fatalf("the close's result %s (%v), want TKT-3 closed", outs[2].Result, err)
	}
	if n := s.countActivities(id, "search_tickets"); n != 1 {
		t.Errorf("search_tickets ran %d times, want once (the second from the memo)", n)
	}
	if tk := s.ticket("TKT-3"); tk.Status != "closed" {
		t.Errorf("TKT-3 is %s on the desk", tk.Status)
	}

	// Bad input fails the operation at once, saying why.
	for _, c := range []struct {
		in   any
		want string
	}{
		{nexusserve.CallInput{Run: "../x", Tool: "search_tickets"}, `run name "../x": want 1 to 64 letters`},
		{map[string]any{"run": "go-agent", "tool": "search_tickets", "idempotency_key": "k"}, `unknown field "idempotency_key"`},
	} {
		r := s.executeCaller(fmt.Sprintf("go-caller-bad-%d", time.Now().UnixNano()), "nexusCallerRaw", c.in)
		err := r.Get(ctx, nil)
		if err == nil || !containsText(err, c.want) {
			t.Errorf("input %v: %v, want an error saying %q", c.in, err, c.want)
		}
	}

	// The run operation: a run, started through Nexus, completes with its result.
	rr := s.executeCaller("go-runner-1", nexusRunner, nexusserve.RunRequest{ID: "go-run", Input: workflows.RunInput{Goal: "search",
		Planner: scripted("found it", step(call("search_tickets", `{"query":"login"}`)))}})
	var res workflows.RunResult
	if err := rr.Get(ctx, &res); err != nil {
		t.Fatalf("the run operation: %v", err)
	}
	if res.Status != workflows.StatusCompleted || res.Answer != "found it" {
		t.Fatalf("the run operation's result: %+v", res)
	}
	// A run operation for an id whose run is running is refused at once.
	waits := nexusserve.RunRequest{ID: "go-run-waits", Input: workflows.RunInput{Goal: "close",
		Planner: scripted("closed", step(call("close_ticket", `{"ticket_id":"TKT-1"}`)))}}
	s.executeCaller("go-runner-2", nexusRunner, waits)
	s.awaitNext(nexusserve.RunID("go-run-waits"), waitTimeout, "gate:close_ticket")
	err := s.executeCaller("go-runner-3", nexusRunner, waits).Get(ctx, &res)
	if err == nil || !containsText(err, "a run nexus-go-run-waits is running already") {
		t.Fatalf("a second run operation for a running run: %v", err)
	}
}

// containsText reports whether err's text, or that of any error it wraps,
// holds want.
func containsText(err error, want string) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if strings.Contains(err.Error(), want) {
			return true
		}
	}
	return false
}

// countActivities counts the activities of type name run id's history
// scheduled.
func (s *stack) countActivities(id, name string) int {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	n := 0
	it := s.client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			s.t.Fatalf("history of %s: %v", id, err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == name {
			n++
		}
	}
	return n
}

// A caller that cancels its operation while the call waits for a human
// withdraws the call: it ends cancelled by (caller), never runs, and an
// approval that comes after is refused.
func TestNexusCancelWithdrawsAWaitingCall(t *testing.T) {
	s := newNexusStack(t)
	s.startWorker(false)
	s.startNexus(nil)
	s.startGoCaller()
	closeIt := nexusserve.CallInput{Run: "go-cancel", Tool: "close_ticket", Args: json.RawMessage(`{"ticket_id":"TKT-3"}`)}
	run := s.executeCaller("go-caller-cancel", nexusCaller, []nexusserve.CallInput{closeIt})
	id := nexusserve.RunID("go-cancel")
	s.awaitNext(id, waitTimeout, "gate:close_ticket")
	digest := s.mustState(id).Interrupts[0].ArgsDigest
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	if err := s.client.CancelWorkflow(ctx, run.GetID(), ""); err != nil {
		t.Fatalf("cancelling the caller: %v", err)
	}
	err := run.Get(ctx, nil)
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) {
		t.Fatalf("the caller ended %v, want cancelled", err)
	}
	testenv.Eventually(t, waitTimeout, "c-1 cancelled", func() error {
		for _, r := range s.mustTrace(id) {
			if r.CallID == "c-1" && r.Status == workflows.TraceCancelled && r.Approver == workflows.WithdrawnBy {
				return nil
			}
		}
		return fmt.Errorf("trace %v", events(s.mustTrace(id)))
	})
	if _, err := s.approveByUpdate(id, workflows.DecisionInput{CallID: "c-1", Approver: "alice", ArgsDigest: digest}); err == nil {
		t.Fatal("an approval of the withdrawn call was taken")
	}
	if tk := s.ticket("TKT-3"); tk.Status != "open" {
		t.Fatalf("TKT-3 is %s: the withdrawn close ran", tk.Status)
	}
}
