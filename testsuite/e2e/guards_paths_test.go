package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// Issue 45, item 1: a pause stops every new execution of its tool, on
// every path — checked by the worker where the call is about to run, not
// only at the gate.

// pathsPolicy: alice is an operator, bob approves bookings and closes.
func pathsPolicy(t *testing.T, k keyring) *policy.Policy {
	t.Helper()
	p, err := policy.Parse(fmt.Appendf(nil, `approvers:
  alice: {key: %q, roles: [ops]}
  bob:   {key: %q, roles: [support]}
operators: [ops]
tools:
  book_hotel: {approvers: {roles: [support]}}
  close_ticket: {approvers: {roles: [support]}}
`, k.pub("alice"), k.pub("bob")))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// refusedBy is the trace's record of call that says error holds want.
func refusedBy(trace []workflows.TraceRecord, call, want string) bool {
	for _, r := range trace {
		if r.CallID == call && strings.Contains(r.Error, want) {
			return true
		}
	}
	return false
}

// A pause of a read (no guard covers it, and runs never ask the ledger
// about it) stops every run's call of it; once unpaused, the next runs.
func TestAPauseStopsARead(t *testing.T) {
	t.Parallel()
	k := newKeyring(t, "alice", "bob")
	s := newStack(t)
	s.startWorkerWith(func(o *worker.Options) { o.Policy = pathsPolicy(t, k) })
	search := workflows.RunInput{Goal: "find the login ticket", Planner: scripted("found", step(call("search_tickets", `{"query":"login"}`)))}
	if _, err := s.tg.Pause(rewindCtx(t), workflows.TaskQueue, "search_tickets", "the index shows other customers' tickets", "alice", k["alice"]); err != nil {
		t.Fatal(err)
	}
	res := s.runToEnd("paused-read", search)
	if len(records(res.Trace, "c-1", workflows.TraceOK)) != 0 || !refusedBy(res.Trace, "c-1", "not executed: search_tickets is paused fleet-wide by alice") {
		t.Fatalf("a read during its pause: %v", events(res.Trace))
	}
	if _, err := s.tg.Unpause(rewindCtx(t), workflows.TaskQueue, "search_tickets", "index fixed", "alice", k["alice"]); err != nil {
		t.Fatal(err)
	}
	if res := s.runToEnd("unpaused-read", search); len(records(res.Trace, "c-1", workflows.TraceOK)) != 1 {
		t.Fatalf("a read after the unpause: %v", events(res.Trace))
	}
}

// A booking approved before a pause, whose tool then asks its own question
// (the compliance hold of a guest name that looks like SQL), does not run
// when that question is approved after the pause: the worker refuses the
// tool's second execution. The client says so before anyone approves.
func TestAPauseStopsAToolsOwnQuestion(t *testing.T) {
	t.Parallel()
	k := newKeyring(t, "alice", "bob")
	s := newStack(t)
	s.startWorkerWith(func(o *worker.Options) { o.Policy = pathsPolicy(t, k) })
	const id = "paused-question"
	s.start(id, workflows.RunInput{Goal: "book a stay", Planner: scripted("booked",
		step(call("book_hotel", `{"guest":"x' OR 1=1 --","hotel":"Grand","nights":1}`)))})
	s.awaitNext(id, waitTimeout, "gate:book_hotel")
	s.signedDecide(id, k, "bob", true, "c-1")
	s.awaitNext(id, waitTimeout, "interrupt:book_hotel")
	st := s.mustState(id)
	if _, err := s.tg.Pause(rewindCtx(t), workflows.TaskQueue, "book_hotel", "INC-9: double bookings", "alice", k["alice"]); err != nil {
		t.Fatal(err)
	}
	if p, _, err := s.tg.PauseOf(rewindCtx(t), id, st.Interrupts[0]); err != nil || p == nil || p.By != "alice" {
		t.Fatalf("the client on the waiting question: pause %+v, %v; want alice's pause", p, err)
	}
	s.signedDecide(id, k, "bob", true, "c-1")
	res := s.result(id, waitTimeout)
	if len(records(res.Trace, "c-1", workflows.TraceOK)) != 0 || !refusedBy(res.Trace, "c-1", "not executed: book_hotel is paused fleet-wide by alice") {
		t.Fatalf("the booking approved after the pause: %v", events(res.Trace))
	}
}

// A pause of a tool no worker of the queue has (a misspelt name) is
// refused, naming the tools there; nothing is paused.
func TestAPauseOfAToolNoWorkerHasIsRefused(t *testing.T) {
	t.Parallel()
	k := newKeyring(t, "alice", "bob")
	s := newStack(t)
	s.startWorkerWith(func(o *worker.Options) { o.Policy = pathsPolicy(t, k) })
	_, err := s.tg.Pause(rewindCtx(t), workflows.TaskQueue, "refnud", "INC-10", "alice", k["alice"])
	if err == nil || !strings.Contains(err.Error(), `no tool "refnud" on this task queue`) || !strings.Contains(err.Error(), "refund") {
		t.Fatalf("a pause of refnud: %v", err)
	}
	if v, ok, err := s.tg.Guards(rewindCtx(t), workflows.TaskQueue); err != nil || (ok && len(v.Pauses) != 0) {
		t.Fatalf("after the refused pause: %+v (started %v): %v", v.Pauses, ok, err)
	}
	if _, err := s.tg.Pause(rewindCtx(t), workflows.TaskQueue, ledger.AllTools, "INC-10", "alice", k["alice"]); err != nil {
		t.Fatalf("a pause of every destructive tool: %v", err)
	}
}

// runToEnd starts run id and returns its result.
func (s *stack) runToEnd(id string, in workflows.RunInput) workflows.RunResult {
	s.t.Helper()
	s.start(id, in)
	return s.result(id, waitTimeout)
}

// A tool another worker hosts on its own task queue (here a read, which
// never asks the ledger at the gate), paused: the gate's worker signs no
// permit for its call, so the call never reaches its host.
func TestAPauseStopsAToolOnAnotherQueue(t *testing.T) {
	t.Parallel()
	k := newKeyring(t, "alice", "bob")
	s := newStack(t)
	s.startWorkerWith(func(o *worker.Options) {
		o.Policy = pathsPolicy(t, k)
		o.Tools = append(o.Tools, tool.Tool{Spec: tool.Spec{Name: "refund_remote", TaskQueue: remoteQueue,
			Timeout: 2 * time.Second, Retry: tool.RetryPolicy{MaxAttempts: 2, InitialInterval: 200 * time.Millisecond}}})
	})
	h := &refundHost{paid: map[string]string{}, attempts: map[string]int{}, hang: make(chan struct{})}
	close(h.hang)
	defer h.start(s).Stop()
	if _, err := s.tg.Pause(rewindCtx(t), workflows.TaskQueue, "refund_remote", "INC-11: the payments API double-charges", "alice", k["alice"]); err != nil {
		t.Fatal(err)
	}
	res := s.runToEnd("paused-remote", workflows.RunInput{Goal: "look up order O-1", Planner: scripted("done", step(call("refund_remote", `{"order":"O-1"}`)))})
	if len(records(res.Trace, "c-1", workflows.TraceOK)) != 0 || !refusedBy(res.Trace, "c-1", "not executed: refund_remote is paused fleet-wide by alice") {
		t.Fatalf("the remote tool's call during its pause: %v", events(res.Trace))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.attempts) != 0 {
		t.Fatalf("the host was asked %v: a paused tool's call reached it", h.attempts)
	}
}
