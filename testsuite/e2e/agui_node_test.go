package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/workflows"
)

// The demo desk driven over AG-UI by @ag-ui/client's HttpAgent, against
// `toolgate dev --agui-address`: a message that makes the support planner
// read twice and propose a close; the run stops with one interrupt for the
// close, which describes exactly the waiting call; a resume approves it, and
// the stream brings the result and the answer. The same resume sent again —
// by the same client, and by a second client that never saw the first
// answer (a retry after a lost response) — acts once, and another answer
// to the decided interrupt is refused. Every stream passes the client's own
// verification.
func TestAGUINodeClientOnDev(t *testing.T) {
	t.Parallel()
	needAGUIClient(t)
	d := startAGUIDev(t)
	nodeWalkthrough(t, d.stack, d.url)
}

// nodeWalkthrough is TestAGUINodeClientOnDev's walk-through on the endpoint
// at url, whose runs s's server and worker hold.
func nodeWalkthrough(t *testing.T, d *stack, url string) {
	const thread = "node-dev-1"
	id := aguiThreadRun(thread)

	first := runAGUINode(t, aguiScript{URL: url, ThreadID: thread, Steps: []aguiStepIn{say("find the login ticket and close it")}})[0]

	// The message: two reads and a close, the close waits.
	mustPass(t, "the message", first, "interrupt")
	wantStarted := []string{`c-1 search_tickets {"query":"login"}`, `c-2 search_tickets {"query":"login"}`, `c-3 close_ticket {"ticket_id":"TKT-3"}`}
	if got := first.started(); !equal(got, wantStarted) {
		t.Fatalf("the message's tool calls:\n got  %q\n want %q", got, wantStarted)
	}
	res := first.results()
	if len(res) != 2 || !strings.Contains(res["c-1"], "TKT-3") || !strings.Contains(res["c-2"], "TKT-3") {
		t.Fatalf("the message's results: %q, want the two searches' (and none for the waiting close)", res)
	}
	for _, e := range first.of("RUN_STARTED") {
		if e.ThreadID != thread {
			t.Fatalf("RUN_STARTED names thread %q, want %q", e.ThreadID, thread)
		}
	}
	st := d.mustState(id)
	if st.Status != workflows.StatusWaitingForApproval || len(st.Interrupts) != 1 || st.Interrupts[0].CallID != "c-3" {
		t.Fatalf("run %s after the message: %+v", id, st)
	}
	if len(first.Outcome.Interrupts) != 1 {
		t.Fatalf("%d interrupts, want 1: %+v", len(first.Outcome.Interrupts), first.Outcome.Interrupts)
	}
	checkInterrupt(t, first.Outcome.Interrupts[0], st.Interrupts[0])
	if door := d.door(id); door != "agui" {
		t.Fatalf("run %s has memo toolgate_door %q, want agui", id, door)
	}
	if tk := d.ticket("TKT-3"); tk.Status != "open" {
		t.Fatalf("TKT-3 is %s before any approval", tk.Status)
	}

	// The same client (its thread as it kept it) resumes, then sends the same
	// resume again once it has the answer.
	resume := resumeWith(approveIt(first.Outcome.Interrupts[0].ID))
	steps := runAGUINode(t, aguiScript{URL: url, ThreadID: thread, Messages: first.Messages, Steps: []aguiStepIn{resume, resume}})
	second, again := steps[0], steps[1]

	// The resume: the close runs, its result and the answer arrive; no call
	// the client already knows is started again.
	mustPass(t, "the resume", second, "success")
	if got := second.started(); len(got) != 0 {
		t.Fatalf("the resume started calls again: %q", got)
	}
	closed := second.results()["c-3"]
	if len(second.results()) != 1 || !strings.Contains(closed, `"closed"`) || strings.Contains(closed, `"already_closed":true`) {
		t.Fatalf("the resume's results: %q, want c-3 closed", second.results())
	}
	if !strings.Contains(second.text(), "Closed TKT-3") {
		t.Fatalf("the resume's answer: %q", second.text())
	}
	tk := d.ticket("TKT-3")
	if tk.Status != "closed" {
		t.Fatalf("TKT-3 is %s after the approval", tk.Status)
	}

	// The same resume again: nothing new runs, nothing the client has is sent
	// again, and its transcript is unchanged.
	mustPass(t, "the same resume again", again, "success")
	if got, res := again.started(), again.results(); len(got) != 0 || len(res) != 0 {
		t.Fatalf("the repeated resume started %q and sent results %q again", got, res)
	}
	if a, b := string(mustJSON(t, second.Messages)), string(mustJSON(t, again.Messages)); a != b {
		t.Fatalf("the repeated resume changed the client's messages:\n before %s\n after  %s", a, b)
	}

	// A second client, with the thread as it was at the interrupt (it never
	// got the first resume's answer), sends the same resume: the same result
	// and answer, and still one close.
	retry := runAGUINode(t, aguiScript{URL: url, ThreadID: thread, Messages: first.Messages, Steps: []aguiStepIn{
		resumeWith(approveIt(first.Outcome.Interrupts[0].ID)),
	}})[0]
	mustPass(t, "the resume retried by another client", retry, "success")
	if got := retry.started(); len(got) != 0 {
		t.Fatalf("the retried resume started calls again: %q", got)
	}
	if got := retry.results(); len(got) != 1 || got["c-3"] != closed {
		t.Fatalf("the retried resume's results %q, want c-3's first result %q", got, closed)
	}
	if !strings.Contains(retry.text(), "Closed TKT-3") {
		t.Fatalf("the retried resume's answer: %q", retry.text())
	}

	// Another answer to the decided interrupt is refused: c-3 was approved.
	other := runAGUINode(t, aguiScript{URL: url, ThreadID: thread, Messages: first.Messages, Steps: []aguiStepIn{
		resumeWith(rejectIt(first.Outcome.Interrupts[0].ID, "changed my mind")),
	}})[0]
	mustRefuse(t, "a rejection of the approved interrupt", other, "")

	trace := d.mustTrace(id)
	if countStatus(trace, "c-3", workflows.TraceRejected) != 0 {
		t.Fatalf("c-3 rejected after its approval: trace %v", events(trace))
	}
	if countStatus(trace, "c-3", workflows.TraceApproved) != 1 || countStatus(trace, "c-3", workflows.TraceOK) != 1 {
		t.Fatalf("c-3 approved and run once? trace %v", events(trace))
	}
	if st := d.mustState(id); st.Calls != 3 || st.Status != workflows.StatusWaitingForInput {
		t.Fatalf("run %s after three resumes: %d calls, status %s; want 3 calls, waiting for input", id, st.Calls, st.Status)
	}
	if again := d.ticket("TKT-3"); again != tk {
		t.Fatalf("TKT-3 changed after the first close:\n %+v\n %+v", tk, again)
	}

	// The next turn's close is cancelled (status "cancelled" in the resume):
	// it does not run, and the client is told it was cancelled, by whom.
	steps = runAGUINode(t, aguiScript{URL: url, ThreadID: thread, Messages: again.Messages, Steps: []aguiStepIn{
		say("find the shipping ticket and close it"), resumeWith(cancelIt("#0")),
	}})
	mustPass(t, "the second message", steps[0], "interrupt")
	mustPass(t, "the cancellation", steps[1], "success")
	var closeID string
	for _, it := range steps[0].Outcome.Interrupts {
		closeID = it.ToolCallID
	}
	if got := steps[1].results()[closeID]; closeID == "" || !strings.HasPrefix(got, "not executed: cancelled by agui") {
		t.Fatalf("the cancelled close's result: %q (call %q), want it said as cancelled", got, closeID)
	}
	trace = d.mustTrace(id)
	if countStatus(trace, closeID, workflows.TraceCancelled) != 1 || countStatus(trace, closeID, workflows.TraceOK) != 0 {
		t.Fatalf("%s cancelled and not run? trace %v", closeID, events(trace))
	}
	if tk := d.ticket("TKT-2"); tk.Status != "open" {
		t.Fatalf("TKT-2 is %s after its close was cancelled", tk.Status)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
