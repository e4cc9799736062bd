package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/workflows"
)

// `toolgate agui --listen` holds nothing a run needs. Killed -9 while a run
// waits for a decision and started again, it answers a reconnect with the
// same interrupt; killed and started again once more, it takes the resume
// the client sends (the thread as the client kept it) though it never showed
// the interrupt; the close runs once, and the same resume sent again through
// it acts no more.
func TestAGUIServeKilledWhileTheRunWaits(t *testing.T) {
	t.Parallel()
	needAGUIClient(t)
	s := newStack(t)
	s.startWorker(false)
	a := s.startAGUIServe("toolgate agui", "")
	if want := "http://" + a.listen + "/agui"; a.url != want {
		t.Fatalf("toolgate agui says AG-UI at %s, want %s", a.url, want)
	}
	const thread = "restart-1"
	id := aguiThreadRun(thread)

	first := runAGUINode(t, aguiScript{URL: a.url, ThreadID: thread, Steps: []aguiStepIn{say("find the login ticket and close it")}})[0]
	mustPass(t, "the message", first, "interrupt")
	st := s.awaitStatus(id, workflows.StatusWaitingForApproval, 0, waitTimeout)
	if len(first.Outcome.Interrupts) != 1 || len(st.Interrupts) != 1 {
		t.Fatalf("want one interrupt: %+v, run %+v", first.Outcome, st.Interrupts)
	}
	checkInterrupt(t, first.Outcome.Interrupts[0], st.Interrupts[0])

	// kill -9, restart: a reconnect (no message, no resume) through the new
	// process gets the same interrupt, and nothing the client has again.
	a = s.restartAGUIServe(a, id)
	back := runAGUINode(t, aguiScript{URL: a.url, ThreadID: thread, Messages: first.Messages, Steps: []aguiStepIn{{}}})[0]
	mustPass(t, "the reconnect through the restarted endpoint", back, "interrupt")
	if got := back.started(); len(got) != 0 || len(back.results()) != 0 || len(back.Outcome.Interrupts) != 1 ||
		back.Outcome.Interrupts[0].ID != first.Outcome.Interrupts[0].ID {
		t.Fatalf("the reconnect after the restart: started %q, results %q, interrupts %s; want only the same interrupt",
			got, back.results(), mustJSON(t, back.Outcome.Interrupts))
	}

	// kill -9, restart: the resume goes straight to the new process (which
	// never showed the interrupt), then the same resume again.
	a = s.restartAGUIServe(a, id)
	resume := resumeWith(approveIt(first.Outcome.Interrupts[0].ID))
	steps := runAGUINode(t, aguiScript{URL: a.url, ThreadID: thread, Messages: first.Messages, Steps: []aguiStepIn{resume, resume}})
	mustPass(t, "the resume through the restarted endpoint", steps[0], "success")
	if got := steps[0].results()["c-3"]; !strings.Contains(got, `"closed"`) {
		t.Fatalf("c-3's result after the restart: %q", got)
	}
	if !strings.Contains(steps[0].text(), "Closed TKT-3") {
		t.Fatalf("the answer after the restart: %q", steps[0].text())
	}
	mustPass(t, "the same resume again", steps[1], "success")
	if got := steps[1].started(); len(got) != 0 || len(steps[1].results()) != 0 {
		t.Fatalf("the repeated resume started %q or sent results %q again", got, steps[1].results())
	}

	trace := s.mustTrace(id)
	if countStatus(trace, "c-3", workflows.TraceApproved) != 1 || countStatus(trace, "c-3", workflows.TraceOK) != 1 {
		t.Fatalf("c-3 approved and run once? trace %v", events(trace))
	}
	if st := s.mustState(id); st.Calls != 3 {
		t.Fatalf("the run has %d calls, want 3", st.Calls)
	}
	if tk := s.ticket("TKT-3"); tk.Status != "closed" || tk.ClosedBy != s.key(id, "c-3") {
		t.Fatalf("TKT-3 %+v: want closed by c-3's call (key %s)", tk, s.key(id, "c-3"))
	}
}

// restartAGUIServe kills a -9, checks that run id still waits, and starts
// `toolgate agui` again on the same address.
func (s *stack) restartAGUIServe(a *aguiServe, id string) *aguiServe {
	t := s.t
	t.Helper()
	a.p.kill()
	if err := a.p.wait(t, 10*time.Second); !killedBySIGKILL(err) {
		t.Fatalf("toolgate agui exit: %v, want killed by SIGKILL", err)
	}
	if st := s.mustState(id); st.Status != workflows.StatusWaitingForApproval || len(st.Interrupts) != 1 {
		t.Fatalf("the run after the endpoint's kill -9: %+v", st)
	}
	return s.startAGUIServe("toolgate agui (restarted)", a.listen)
}
