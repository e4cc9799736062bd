package agui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/workflows"
)

// twoWaiting is a run of thread t1 whose turn 1 has two calls waiting at
// the gate (c-1, c-2), with the messages a client that saw them holds; its
// requests carry callerToken.
func twoWaiting(t *testing.T, edit func(*fakeRun), opts ...func(*Options)) (*fake, http.Handler, []event) {
	t.Helper()
	f := newFake()
	f.onStart = func(r *fakeRun) {
		r.steps = []func(*fakeRun){func(r *fakeRun) {
			r.st.Calls = 2
			r.waitAt("c-1", "close_ticket", `{"ticket_id":"TKT-1"}`, expiry)
			r.waitAt("c-2", "close_ticket", closeArgs, expiry)
			if edit != nil {
				edit(r)
			}
		}}
	}
	f.onDecided = func(r *fakeRun, d decision) {
		if len(r.st.Interrupts) == 0 {
			r.st.Status, r.st.Answer = workflows.StatusWaitingForInput, "done"
		}
	}
	h := asCaller(newHandler(t, f, opts...), callerToken) // ignored unless opts set Callers
	evs := firstTurn(t, h)
	if its := interruptsOfFinish(t, last(evs)); len(its) != 2 {
		t.Fatalf("interrupts %v", its)
	}
	return f, h, evs
}

func resolved(id any, payload map[string]any, metadata ...map[string]any) map[string]any {
	e := map[string]any{"interruptId": id, "status": "resolved", "payload": payload}
	if len(metadata) > 0 {
		e["metadata"] = metadata[0]
	}
	return e
}

func TestAPartialResumeIsRefusedAndNothingIsApplied(t *testing.T) {
	f, h, first := twoWaiting(t, nil)
	its := interruptsOfFinish(t, last(first))
	evs := events(t, post(t, h, input("t1", snapshotMessages(t, first), resolved(its[0]["id"], map[string]any{"approved": true}))))
	if types(evs) != "RUN_ERROR" || last(evs).str("code") != "partial_resume" || !strings.Contains(last(evs).str("message"), its[1]["id"].(string)) {
		t.Fatalf("%s %v", types(evs), last(evs))
	}
	if len(f.decisions) != 0 {
		t.Fatalf("applied %+v", f.decisions)
	}
	// Both answered: both applied, in order, each with its own update id.
	evs = events(t, post(t, h, input("t1", snapshotMessages(t, first),
		resolved(its[0]["id"], map[string]any{"approved": true}), resolved(its[1]["id"], map[string]any{"approved": false, "reason": "not this one"}))))
	if len(f.decisions) != 2 || f.decisions[0].in.CallID != "c-1" || f.decisions[1].how != "reject" || f.decisions[0].update == f.decisions[1].update {
		t.Fatalf("decisions %+v", f.decisions)
	}
	if o := last(evs)["outcome"].(map[string]any); o["type"] != "success" {
		t.Fatalf("%s", types(evs))
	}
}

func TestAnAnswerPastExpiresAtIsRefusedButACancelIsTaken(t *testing.T) {
	f, _ := deskFake()
	h := newHandler(t, f, func(o *Options) { o.Now = func() time.Time { return expiry.Add(time.Second) } })
	first := firstTurn(t, h)
	evs := events(t, post(t, h, input("t1", snapshotMessages(t, first), approve(t, first))))
	if types(evs) != "RUN_ERROR" || last(evs).str("code") != "interrupt_expired" {
		t.Fatalf("%s %v", types(evs), last(evs))
	}
	if len(f.decisions) != 0 {
		t.Fatalf("applied %+v", f.decisions)
	}
	its := interruptsOfFinish(t, last(first))
	evs = events(t, post(t, h, input("t1", snapshotMessages(t, first), map[string]any{"interruptId": its[0]["id"], "status": "cancelled"})))
	if len(f.decisions) != 1 || f.decisions[0].how != "reject" || !f.decisions[0].in.Cancel {
		t.Fatalf("decisions %+v", f.decisions)
	}
	if evs[1].str("content") != "not executed: cancelled by agui" {
		t.Fatalf("%s %v", types(evs), evs[1])
	}
}

func TestARunUnderAPolicyTakesOnlySignedAnswers(t *testing.T) {
	f, h, first := twoWaiting(t, func(r *fakeRun) { r.st.Policy, r.st.RequestedBy = true, "carol" }, callers("carol", nil))
	its := interruptsOfFinish(t, last(first))
	if md := its[0]["metadata"].(map[string]any); md["signed"] != true || md["asked"] == "" {
		t.Fatalf("metadata %v", md)
	}
	msgs := snapshotMessages(t, first)
	evs := events(t, post(t, h, input("t1", msgs,
		resolved(its[0]["id"], map[string]any{"approved": true}, map[string]any{"token": "eyJ.sig.ned"}),
		resolved(its[1]["id"], map[string]any{"approved": true}, map[string]any{"approver": "alice"}))))
	if types(evs) != "RUN_ERROR" || last(evs).str("code") != "unsigned" || !strings.Contains(last(evs).str("message"), "must be signed") {
		t.Fatalf("%s %v", types(evs), last(evs))
	}
	if len(f.decisions) != 0 {
		t.Fatalf("applied %+v", f.decisions)
	}
	evs = events(t, post(t, h, input("t1", msgs,
		resolved(its[0]["id"], map[string]any{"approved": true}, map[string]any{"token": "eyJ.one"}),
		resolved(its[1]["id"], map[string]any{"approved": true}, map[string]any{"token": "eyJ.two"}))))
	if len(f.decisions) != 2 || f.decisions[0].in.Token != "eyJ.one" || f.decisions[1].in.Token != "eyJ.two" || f.decisions[0].in.Approver != "" {
		t.Fatalf("%s: decisions %+v", types(evs), f.decisions)
	}
}

func TestResumesThatCannotApplyAreRefusedBeforeAnyIsSent(t *testing.T) {
	for _, c := range []struct {
		name  string
		entry func(its []map[string]any) []map[string]any
		code  string
	}{
		{"unknown interrupt", func(its []map[string]any) []map[string]any {
			return []map[string]any{resolved("c-9:gate:0123456789abcdef", map[string]any{"approved": true})}
		}, "unknown_interrupt"},
		{"data for the gate", func(its []map[string]any) []map[string]any {
			return []map[string]any{resolved(its[0]["id"], map[string]any{"approved": true, "data": map[string]any{"x": 1}}), resolved(its[1]["id"], map[string]any{"approved": true})}
		}, "refused_answer"},
		{"a digest of other arguments", func(its []map[string]any) []map[string]any {
			id := its[0]["id"].(string)
			return []map[string]any{resolved(id[:len(id)-16]+"0000000000000000", map[string]any{"approved": true}), resolved(its[1]["id"], map[string]any{"approved": true})}
		}, "unknown_interrupt"},
	} {
		f, h, first := twoWaiting(t, nil)
		var resume []map[string]any = c.entry(interruptsOfFinish(t, last(first)))
		evs := events(t, post(t, h, input("t1", snapshotMessages(t, first), resume...)))
		if types(evs) != "RUN_ERROR" || last(evs).str("code") != c.code {
			t.Fatalf("%s: %s %v", c.name, types(evs), last(evs))
		}
		if len(f.decisions) != 0 {
			t.Fatalf("%s: applied %+v", c.name, f.decisions)
		}
	}
}

func TestAResumeWithANewMessageIsRefused(t *testing.T) {
	f, _ := deskFake()
	h := newHandler(t, f)
	first := firstTurn(t, h)
	evs := events(t, post(t, h, input("t1", append(snapshotMessages(t, first), userMsg("u2", "more")), approve(t, first))))
	if types(evs) != "RUN_ERROR" || last(evs).str("code") != "resume_with_message" || len(f.decisions)+len(f.messages) != 0 {
		t.Fatalf("%s %v, decisions %v, messages %v", types(evs), last(evs), f.decisions, f.messages)
	}
}

func TestEditsAndResponsesBecomeTheirUpdates(t *testing.T) {
	f, h, first := twoWaiting(t, nil)
	its := interruptsOfFinish(t, last(first))
	evs := events(t, post(t, h, input("t1", snapshotMessages(t, first),
		resolved(its[0]["id"], map[string]any{"approved": true, "editedArgs": map[string]any{"ticket_id": "TKT-2"}, "reason": "the right one"}),
		resolved(its[1]["id"], map[string]any{"approved": true, "response": map[string]any{"closed": "by hand"}}))))
	if len(f.decisions) != 2 {
		t.Fatalf("%s: decisions %+v", types(evs), f.decisions)
	}
	e, r := f.decisions[0], f.decisions[1]
	if e.how != "approve" || string(e.in.EditedArgs) != `{"ticket_id":"TKT-2"}` || e.in.Note != "the right one" {
		t.Fatalf("edit %+v", e)
	}
	if r.how != "respond" || string(r.in.Response) != `{"closed":"by hand"}` {
		t.Fatalf("response %+v", r)
	}
}

func TestUpdateIDsDependOnThreadInterruptAndAnswer(t *testing.T) {
	a := json.RawMessage(`{"interruptId":"c-2:gate:0123456789abcdef","status":"resolved","payload":{"approved":true}}`)
	same := json.RawMessage(`{"status":"resolved", "payload":{"approved":true},"interruptId":"c-2:gate:0123456789abcdef"}`)
	other := json.RawMessage(`{"interruptId":"c-2:gate:0123456789abcdef","status":"resolved","payload":{"approved":false}}`)
	id := updateID("t1", "c-2:gate:0123456789abcdef", a)
	if updateID("t1", "c-2:gate:0123456789abcdef", same) != id {
		t.Fatal("the same answer, its keys in another order, has another update id")
	}
	for _, o := range []string{updateID("t2", "c-2:gate:0123456789abcdef", a), updateID("t1", "c-3:gate:0123456789abcdef", a), updateID("t1", "c-2:gate:0123456789abcdef", other)} {
		if o == id {
			t.Fatal("another thread, interrupt or answer has the same update id")
		}
	}
}

// A resume whose metadata.approver takes a name the run or a door writes
// itself (rule:…, grant:…, policy:…, elicitation:…, webhook:…, slack:…, in
// any case) is refused with 400, naming the reserved prefixes, and nothing
// reaches the run; a person's name is taken.
func TestAnApproverNameTheRunWritesIsRefused(t *testing.T) {
	f, h, first := twoWaiting(t, nil)
	its := interruptsOfFinish(t, last(first))
	msgs := snapshotMessages(t, first)
	answer := func(approver string) map[string]any {
		return input("t1", msgs, resolved(its[0]["id"], map[string]any{"approved": true}, map[string]any{"approver": approver}),
			resolved(its[1]["id"], map[string]any{"approved": true}, map[string]any{"approver": "alice"}))
	}
	for _, name := range []string{"rule:small-refunds", "grant:bob", "policy:always_approve", "elicitation:alice", "webhook:ops", "slack:U123", "Rule:x", "SLACK:bob"} {
		rec := post(t, h, answer(name))
		if body := rec.Body.String(); rec.Code != 400 || !strings.Contains(body, "metadata.approver") ||
			!strings.Contains(body, "rule:, grant:, policy:, elicitation:, webhook:, slack: are reserved") {
			t.Errorf("metadata.approver %q: %d %q, want 400 naming the reserved prefixes", name, rec.Code, body)
		}
	}
	if len(f.decisions) != 0 {
		t.Fatalf("a refused resume reached the run: %+v", f.decisions)
	}
	events(t, post(t, h, answer("carol")))
	if len(f.decisions) != 2 || f.decisions[0].in.Approver != "carol" || f.decisions[1].in.Approver != "alice" {
		t.Fatalf("decisions %+v, want carol's and alice's", f.decisions)
	}
}

// A refusal names its kind in RUN_ERROR's code: a run that has closed is
// run_closed, not no_run.
func TestRefusalCodes(t *testing.T) {
	for kind, want := range map[error]string{
		client.ErrUnknownRun:     "no_run",
		client.ErrRunClosed:      "run_closed",
		client.ErrAlreadyDecided: "already_decided",
	} {
		if got := refusalCode(fmt.Errorf("approve c-1: %w", &client.Error{Kind: kind, Msg: "x"})); got != want {
			t.Errorf("refusalCode(%v) = %q, want %q", kind, got, want)
		}
	}
}
