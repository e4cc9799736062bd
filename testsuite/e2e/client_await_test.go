package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/workflows"
)

// AwaitDecision on the real server, right after Start (where State would
// show nothing waiting yet): it returns once the close waits at the gate,
// and the approval bound to what it showed lets the run finish. A run with
// nothing to decide ends first, and the error says how; so does a run
// terminated while it waited, whose last state (a call waiting) is never
// returned as if the run still waited.
func TestClientAwaitDecision(t *testing.T) {
	s := newStack(t)
	s.startWorker(false)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	const id = "await-close"
	s.start(id, workflows.RunInput{Goal: "close TKT-3", Planner: scripted("closed",
		step(call("search_tickets", `{"query":"login"}`)), step(call("close_ticket", `{"ticket_id":"TKT-3"}`)))})
	st, err := s.tg.AwaitDecision(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != workflows.StatusWaitingForApproval || len(st.Interrupts) != 1 || st.Interrupts[0].CallID != "c-2" ||
		st.Interrupts[0].Tool != "close_ticket" || st.Interrupts[0].ArgsDigest == "" {
		t.Fatalf("AwaitDecision: %+v, want c-2 (close_ticket) waiting with its args_digest", st)
	}
	outs, err := s.tg.Approve(ctx, id, tgclient.As("alice"), st.Interrupts[0].CallID)
	if err != nil || outs[0].Err != nil || outs[0].Interrupt.ArgsDigest != st.Interrupts[0].ArgsDigest {
		t.Fatalf("approve: %v %+v", err, outs)
	}
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("result %+v, want completed", res)
	}

	const nothing = "await-nothing"
	s.start(nothing, workflows.RunInput{Goal: "look", Planner: scripted("TKT-3 is closed", step(call("get_ticket", `{"ticket_id":"TKT-3"}`)))})
	_, err = s.tg.AwaitDecision(ctx, nothing)
	if want := "run " + nothing + " completed without waiting for a decision: TKT-3 is closed"; err == nil || err.Error() != want ||
		!errors.Is(err, tgclient.ErrRunEnded) {
		t.Errorf("AwaitDecision on a run with nothing to decide: %v, want %q (ErrRunEnded)", err, want)
	}

	const gone = "await-terminated"
	s.start(gone, workflows.RunInput{Goal: "close TKT-2", Planner: scripted("closed", step(call("close_ticket", `{"ticket_id":"TKT-2"}`)))})
	if _, err := s.tg.AwaitDecision(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if err := s.client.TerminateWorkflow(ctx, gone, "", "the operator stopped it"); err != nil {
		t.Fatal(err)
	}
	st, err = s.tg.AwaitDecision(ctx, gone)
	if err == nil || !errors.Is(err, tgclient.ErrRunEnded) || !strings.Contains(err.Error(), "run "+gone+" ended without waiting for a decision: ") {
		t.Errorf("AwaitDecision on a terminated run: %+v, %v; want ErrRunEnded", st, err)
	}

	_, err = s.tg.AwaitDecision(ctx, "no-such-run")
	if !errors.Is(err, tgclient.ErrUnknownRun) {
		t.Errorf("AwaitDecision on an unknown run: %v, want ErrUnknownRun", err)
	}
}
