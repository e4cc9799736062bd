package e2e

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/agui"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/workflows"
)

// serveAGUI serves the agui package's handler over the stack's client, with
// planner, on a loopback port, and returns its URL (…/agui).
func (s *stack) serveAGUI(planner plan.Config) string {
	t := s.t
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h, err := agui.New(agui.Options{Backend: agui.NewBackend(s.tg), Planner: planner, Hosts: []string{l.Addr().String()}})
	if err != nil {
		_ = l.Close()
		t.Fatalf("agui.New: %v", err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: h}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL + agui.Path
}

// A message whose turn closes two tickets stops the run on two interrupts.
// A resume must answer both: one that answers one of them, one that answers
// the same one twice, and one with an interrupt id the run never had are
// each refused with RUN_ERROR and change nothing — both calls still wait,
// nothing is decided, both tickets are open. Then a resume answering both
// (approve one, reject the other with a reason) is applied, and the stream
// says what happened to each.
//
// The demo desk's support planner closes one ticket a turn, so the endpoint
// here is the agui package's handler in this process, with a scripted
// planner that proposes both closes at once.
func TestAGUIPartialResumeRefused(t *testing.T) {
	t.Parallel()
	needAGUIClient(t)
	s := newStack(t)
	s.startWorker(false)
	url := s.serveAGUI(scripted("Done with both.",
		step(call("close_ticket", `{"ticket_id":"TKT-3"}`), call("close_ticket", `{"ticket_id":"TKT-4"}`))))
	const thread = "two-closes"
	id := aguiThreadRun(thread)

	const unknown = "c-9:gate:0123456789abcdef"
	first := runAGUINode(t, aguiScript{URL: url, ThreadID: thread, Steps: []aguiStepIn{say("close TKT-3 and TKT-4")}})[0]
	mustPass(t, "the message", first, "interrupt")
	st := s.mustState(id)
	if len(st.Interrupts) != 2 || len(first.Outcome.Interrupts) != 2 {
		t.Fatalf("want two waiting calls and two interrupts: run %s, outcome %s", mustJSON(t, st.Interrupts), first)
	}
	byCall := map[string]aguiInterrupt{}
	for _, it := range first.Outcome.Interrupts {
		byCall[it.ToolCallID] = it
	}
	var closeIt, keepIt aguiInterrupt // TKT-3's close, TKT-4's
	for _, w := range st.Interrupts {
		checkInterrupt(t, byCall[w.CallID], w)
		if strings.Contains(string(w.CallArgs), "TKT-3") {
			closeIt = byCall[w.CallID]
		} else {
			keepIt = byCall[w.CallID]
		}
	}

	// A new HttpAgent holding the thread's messages (not the interrupts:
	// HttpAgent checks a resume against those of its own last run only)
	// sends each resume; the endpoint refuses them.
	refused := runAGUINode(t, aguiScript{URL: url, ThreadID: thread, Messages: first.Messages, Steps: []aguiStepIn{
		resumeWith(approveIt(closeIt.ID)),
		resumeWith(approveIt(closeIt.ID), approveIt(closeIt.ID)),
		resumeWith(approveIt(closeIt.ID), approveIt(keepIt.ID), approveIt(unknown)),
	}})
	mustRefuse(t, "a resume answering one of two interrupts", refused[0], "partial resume")
	mustRefuseAny(t, "a resume answering one interrupt twice", refused[1], "once")
	mustRefuseAny(t, "a resume naming an unknown interrupt", refused[2], unknown)
	after := s.mustState(id)
	if after.Status != workflows.StatusWaitingForApproval || len(after.Interrupts) != 2 {
		t.Fatalf("a refused resume changed the run: %+v", after)
	}
	for _, r := range s.mustTrace(id) {
		if r.Status != workflows.TraceBlocked {
			t.Fatalf("a refused resume decided or ran something: trace %v", events(s.mustTrace(id)))
		}
	}
	for _, tk := range []string{"TKT-3", "TKT-4"} {
		if got := s.ticket(tk); got.Status != "open" {
			t.Fatalf("%s is %s after refused resumes", tk, got.Status)
		}
	}

	// Both answered: one approved, one rejected with a reason.
	done := runAGUINode(t, aguiScript{URL: url, ThreadID: thread, Messages: first.Messages, Steps: []aguiStepIn{
		resumeWith(approveIt(closeIt.ID), rejectIt(keepIt.ID, "wrong ticket")),
	}})[0]
	mustPass(t, "the resume answering both", done, "success")
	res := done.results()
	if !strings.Contains(res[closeIt.ToolCallID], `"closed"`) {
		t.Fatalf("the approved close's result: %q", res[closeIt.ToolCallID])
	}
	if r := res[keepIt.ToolCallID]; !strings.Contains(r, "not executed") || !strings.Contains(r, "rejected") || !strings.Contains(r, "wrong ticket") {
		t.Fatalf("the rejected close's result %q should say it was not executed, rejected, and why", r)
	}
	trace := s.mustTrace(id)
	approved := records(trace, closeIt.ToolCallID, workflows.TraceApproved)
	rejected := records(trace, keepIt.ToolCallID, workflows.TraceRejected)
	if len(approved) != 1 || approved[0].Approver != "agui" || len(rejected) != 1 || rejected[0].Reason != "wrong ticket" {
		t.Fatalf("want one approval (by agui) and one rejection (wrong ticket): trace %+v", trace)
	}
	if got := s.ticket("TKT-3").Status; got != "closed" {
		t.Fatalf("TKT-3 is %s after its approval", got)
	}
	if got := s.ticket("TKT-4").Status; got != "open" {
		t.Fatalf("TKT-4 is %s after its rejection", got)
	}
}
