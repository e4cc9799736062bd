package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/toolgate/toolgate/nexusserve"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// eventsPerLook is what one look of a call workflow's own adds to its
// history (nexusserve's TestCallsTheRunTellsOfPollNothingForAWeek counts a
// week's looks with it): the timer fired, a workflow task, the local
// activity's marker, the next timer.
var eventsPerLook = []enumspb.EventType{
	enumspb.EVENT_TYPE_TIMER_FIRED,
	enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
	enumspb.EVENT_TYPE_MARKER_RECORDED,
	enumspb.EVENT_TYPE_TIMER_STARTED,
}

// A Nexus call that waits for a human holds no activity open and polls
// nothing: its workflow adds events only when it looks of its own (every
// Recheck, here 2 s; a week by default), each look exactly eventsPerLook,
// and the run tells it when the call ends. A second call with the open
// call's key and other arguments, or another tool, is refused, saying why,
// and the first call's arguments are the ones that run.
func TestNexusCallWaitsForTheRunsWord(t *testing.T) {
	s := newNexusStack(t)
	s.startWorker(false)
	s.startNexus(func(o *nexusserve.Options) { o.Recheck = 2 * time.Second })
	s.startGoCaller()

	closeIt := nexusserve.CallInput{Run: "go-told", Tool: "close_ticket", Args: json.RawMessage(`{"ticket_id":"TKT-3"}`), Key: "close-k"}
	run := s.executeCaller("go-caller-told", nexusCaller, []nexusserve.CallInput{closeIt})
	id := nexusserve.RunID("go-told")
	s.awaitNext(id, waitTimeout, "gate:close_ticket")
	callWF := nexusserve.CallWorkflowID(id, workflows.Proposal{Tool: closeIt.Tool, Args: closeIt.Args, Key: closeIt.Key})

	// Two looks of its own, then its history is read.
	var h *historypb.History
	testenv.Eventually(t, 2*waitTimeout, "two looks of the call workflow's own", func() error {
		h = s.history(callWF, "")
		if n := countEvents(h, enumspb.EVENT_TYPE_TIMER_FIRED); n < 2 {
			return fmt.Errorf("%d timers fired", n)
		}
		return nil
	})
	first := -1
	for i, ev := range h.GetEvents() {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() != nexusserve.ActivityPropose {
			t.Fatalf("the waiting call scheduled activity %s: it watches instead of waiting for the run's word", a.GetActivityType().GetName())
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED && first < 0 {
			first = i
		}
	}
	if first < 0 {
		t.Fatalf("no timer in the call workflow's history: %v", eventTypes(h.GetEvents()))
	}
	waited := h.GetEvents()[first+1:]
	looks := countEvents(h, enumspb.EVENT_TYPE_TIMER_FIRED)
	for i, ev := range waited {
		if want := eventsPerLook[i%len(eventsPerLook)]; ev.GetEventType() != want {
			t.Fatalf("event %d after the first timer is %s, want %s: events while waiting %v", i, ev.GetEventType(), want, eventTypes(waited))
		}
	}
	if len(waited) > looks*len(eventsPerLook) {
		t.Fatalf("%d events while waiting for %d looks, want %d each: %v", len(waited), looks, len(eventsPerLook), eventTypes(waited))
	}
	t.Logf("while waiting: %d events for %d looks of its own (%d each)", len(waited), looks, len(eventsPerLook))

	// The same key with other arguments, or another tool: refused, saying why.
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	for i, other := range []nexusserve.CallInput{
		{Run: "go-told", Tool: "close_ticket", Args: json.RawMessage(`{"ticket_id":"TKT-4"}`), Key: "close-k"},
		{Run: "go-told", Tool: "search_tickets", Args: json.RawMessage(`{"query":"login"}`), Key: "close-k"},
	} {
		err := s.executeCaller(fmt.Sprintf("go-caller-other-%d", i), nexusCaller, []nexusserve.CallInput{other}).Get(ctx, nil)
		if err == nil || !containsText(err, `idempotency key "close-k" names call c-1`) {
			t.Fatalf("a call with the open call's key and %s %s: %v, want it refused as a key that names call c-1", other.Tool, other.Args, err)
		}
	}

	// Approved, the call runs with its own arguments, and the run's word ends the wait.
	st := s.mustState(id)
	if _, err := s.approveByUpdate(id, workflows.DecisionInput{CallID: st.Interrupts[0].CallID, Approver: "alice", ArgsDigest: st.Interrupts[0].ArgsDigest}); err != nil {
		t.Fatalf("approving the close: %v", err)
	}
	var outs []nexusserve.CallOutput
	if err := run.Get(ctx, &outs); err != nil {
		t.Fatalf("the caller's workflow: %v", err)
	}
	if len(outs) != 1 || outs[0].Status != workflows.TraceOK {
		t.Fatalf("outputs %+v", outs)
	}
	if tk := s.ticket("TKT-3"); tk.Status != "closed" {
		t.Fatalf("TKT-3 is %s", tk.Status)
	}
	if tk := s.ticket("TKT-4"); tk.Status != "open" {
		t.Fatalf("TKT-4 is %s: the refused call's arguments ran", tk.Status)
	}
	if n := countSignals(s.history(callWF, ""), workflows.SignalCallEnded); n != 1 {
		t.Fatalf("the call workflow got %d %s signals, want the run's one", n, workflows.SignalCallEnded)
	}
}

// countEvents counts the events of type typ in h.
func countEvents(h *historypb.History, typ enumspb.EventType) int {
	n := 0
	for _, ev := range h.GetEvents() {
		if ev.GetEventType() == typ {
			n++
		}
	}
	return n
}

// countSignals counts the signals named name in h.
func countSignals(h *historypb.History, name string) int {
	n := 0
	for _, ev := range h.GetEvents() {
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == name {
			n++
		}
	}
	return n
}

// eventTypes lists the types of evs.
func eventTypes(evs []*historypb.HistoryEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.GetEventType().String()
	}
	return out
}

// Two operations of one call (one key, tool and arguments) share its
// workflow, so one caller's cancel withdraws the call for both: each ends
// cancelled, and the call never runs (docs/nexus.md, "Cancel withdraws,
// for every caller of the call").
func TestNexusOneCallersCancelWithdrawsTheCallForAll(t *testing.T) {
	s := newNexusStack(t)
	s.startWorker(false)
	s.startNexus(nil)
	s.startGoCaller()
	closeIt := nexusserve.CallInput{Run: "go-shared", Tool: "close_ticket", Args: json.RawMessage(`{"ticket_id":"TKT-3"}`), Key: "shared-k"}
	a := s.executeCaller("go-caller-a", nexusCaller, []nexusserve.CallInput{closeIt})
	id := nexusserve.RunID("go-shared")
	s.awaitNext(id, waitTimeout, "gate:close_ticket")
	b := s.executeCaller("go-caller-b", nexusCaller, []nexusserve.CallInput{closeIt})
	callWF := nexusserve.CallWorkflowID(id, workflows.Proposal{Tool: closeIt.Tool, Args: closeIt.Args, Key: closeIt.Key})
	testenv.Eventually(t, waitTimeout, "both operations attached to the call's workflow", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		d, err := s.client.DescribeWorkflowExecution(ctx, callWF, "")
		if err != nil {
			return err
		}
		if n := len(d.GetCallbacks()); n != 2 {
			return fmt.Errorf("%d callbacks", n)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	if err := s.client.CancelWorkflow(ctx, a.GetID(), ""); err != nil {
		t.Fatalf("cancelling caller a: %v", err)
	}
	for name, r := range map[string]interface {
		Get(context.Context, any) error
	}{"a": a, "b": b} {
		if err := r.Get(ctx, nil); err == nil || !containsText(err, "cancel") {
			t.Errorf("caller %s ended %v, want its operation cancelled", name, err)
		}
	}
	if tk := s.ticket("TKT-3"); tk.Status != "open" {
		t.Fatalf("TKT-3 is %s: the withdrawn close ran", tk.Status)
	}
}
