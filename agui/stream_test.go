package agui

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/workflows"
)

// firstTurn posts the desk's first message on thread t1 and returns the
// stream's events.
func firstTurn(t *testing.T, h http.Handler) []event {
	t.Helper()
	return events(t, post(t, h, input("t1", []json.RawMessage{userMsg("u1", goal)})))
}

func TestFirstMessageStreamsTheReadThenTheCloseAsAnInterrupt(t *testing.T) {
	f, _ := deskFake()
	h := newHandler(t, f)
	evs := firstTurn(t, h)
	want := "RUN_STARTED TOOL_CALL_START(c-1) TOOL_CALL_ARGS(c-1) TOOL_CALL_END(c-1) TOOL_CALL_RESULT(c-1) " +
		"TOOL_CALL_START(c-2) TOOL_CALL_ARGS(c-2) TOOL_CALL_END(c-2) STATE_SNAPSHOT MESSAGES_SNAPSHOT RUN_FINISHED"
	if got := types(evs); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	if len(f.starts) != 1 {
		t.Fatalf("starts: %v", f.starts)
	}
	in := f.starts[0]
	if in.Goal != goal || !in.Session || in.Planner.Kind != plan.KindSupport || in.Approval != "" {
		t.Fatalf("started with %+v", in)
	}
	if evs[0].str("threadId") != "t1" || evs[0].str("runId") != "run-1" {
		t.Fatalf("RUN_STARTED %v", evs[0])
	}
	if evs[1].str("toolCallName") != "search_tickets" || evs[1].str("parentMessageId") != "calls-c-1" || evs[2].str("delta") != readArgs {
		t.Fatalf("the read: %v %v", evs[1], evs[2])
	}
	if evs[4].str("content") != readOut || evs[4].str("messageId") != "result-c-1" || evs[4].str("role") != "tool" {
		t.Fatalf("the read's result: %v", evs[4])
	}
	if evs[6].str("delta") != closeArgs {
		t.Fatalf("the close's arguments: %v", evs[6])
	}
	its := interruptsOfFinish(t, last(evs))
	st := f.runs["agui-t1"].st
	if len(its) != 1 {
		t.Fatalf("interrupts %v", its)
	}
	it := its[0]
	md := it["metadata"].(map[string]any)
	if it["id"] != "c-2:gate:"+st.Interrupts[0].ArgsDigest[:16] || it["reason"] != "tool_call" || it["toolCallId"] != "c-2" ||
		it["expiresAt"] != "2030-01-02T03:04:05Z" || md["args_digest"] != st.Interrupts[0].ArgsDigest || md["tool"] != "close_ticket" ||
		md["kind"] != "gate" || !strings.Contains(it["message"].(string), "needs confirmation") {
		t.Fatalf("interrupt %v", it)
	}
	if schema, _ := it["responseSchema"].(map[string]any); schema["required"].([]any)[0] != "approved" {
		t.Fatalf("responseSchema %v", it["responseSchema"])
	}
	var ids []string
	for _, m := range snapshotMessages(t, evs) {
		var mm map[string]any
		_ = json.Unmarshal(m, &mm)
		ids = append(ids, mm["id"].(string))
	}
	if got := strings.Join(ids, " "); got != "u1 calls-c-1 result-c-1 calls-c-2" {
		t.Fatalf("snapshot messages %s", got)
	}
	snap := evs[len(evs)-3]["snapshot"].(map[string]any)
	if snap["status"] != workflows.StatusWaitingForApproval || snap["turn"] != 1.0 || len(snap["interrupts"].([]any)) != 1 {
		t.Fatalf("state snapshot %v", snap)
	}
}

// approve is a resume that approves the interrupt of evs's RUN_FINISHED.
func approve(t *testing.T, evs []event) map[string]any {
	its := interruptsOfFinish(t, last(evs))
	return map[string]any{"interruptId": its[0]["id"], "status": "resolved", "payload": map[string]any{"approved": true}}
}

func TestResumeThatApprovesSendsOnlyTheResultOfTheOriginalCall(t *testing.T) {
	f, closed := deskFake()
	h := newHandler(t, f)
	first := firstTurn(t, h)
	evs := events(t, post(t, h, input("t1", snapshotMessages(t, first), approve(t, first))))
	want := "RUN_STARTED TOOL_CALL_RESULT(c-2) TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END STATE_SNAPSHOT MESSAGES_SNAPSHOT RUN_FINISHED"
	if got := types(evs); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	if evs[1].str("content") != closeOut || evs[3].str("delta") != answerTxt || evs[2].str("messageId") != "answer-1" {
		t.Fatalf("result and answer: %v %v", evs[1], evs[3])
	}
	if o := last(evs)["outcome"].(map[string]any); o["type"] != "success" {
		t.Fatalf("outcome %v", o)
	}
	if len(f.decisions) != 1 || *closed != 1 {
		t.Fatalf("decisions %+v, closed %d", f.decisions, *closed)
	}
	d := f.decisions[0]
	it := f.runs["agui-t1"].trace[1] // the close's blocked record
	if d.how != "approve" || d.in.CallID != "c-2" || d.in.Kind != workflows.KindGate || d.in.Approver != DefaultApprover ||
		!strings.HasPrefix(d.update, "agui-") || d.in.ArgsDigest == "" || it.CallID != "c-2" {
		t.Fatalf("decision %+v", d)
	}
	if len(f.messages) != 0 || len(f.starts) != 1 {
		t.Fatalf("a resume sent messages %v or started %d runs", f.messages, len(f.starts))
	}
}

func TestTheSameResumeTwiceSendsTheSameUpdateIDAndActsOnce(t *testing.T) {
	for _, forget := range []bool{false, true} {
		f, closed := deskFake()
		f.forget = forget // true: Temporal no longer holds the first update; the run refuses the second
		h := newHandler(t, f)
		first := firstTurn(t, h)
		body := input("t1", snapshotMessages(t, first), approve(t, first))
		one := events(t, post(t, h, body))
		two := events(t, post(t, h, body)) // the first stream was lost: the client sends it again
		if len(f.decisions) != 2 || f.decisions[0].update != f.decisions[1].update {
			t.Fatalf("forget %v: decisions %+v", forget, f.decisions)
		}
		if *closed != 1 || !f.decisions[0].applied || f.decisions[1].applied {
			t.Fatalf("forget %v: closed %d times, decisions %+v", forget, *closed, f.decisions)
		}
		if types(one) != types(two) || last(two)["outcome"].(map[string]any)["type"] != "success" {
			t.Fatalf("forget %v: the second stream %s, the first %s", forget, types(two), types(one))
		}
	}
}

func TestAReplayThatContradictsTheRecordedDecisionIsRefused(t *testing.T) {
	f, _ := deskFake()
	f.forget = true
	h := newHandler(t, f)
	first := firstTurn(t, h)
	events(t, post(t, h, input("t1", snapshotMessages(t, first), approve(t, first))))
	reject := approve(t, first)
	reject["payload"] = map[string]any{"approved": false, "reason": "wrong ticket"}
	evs := events(t, post(t, h, input("t1", snapshotMessages(t, first), reject)))
	if types(evs) != "RUN_STARTED RUN_ERROR" || last(evs).str("code") != "already_decided" || !strings.Contains(last(evs).str("message"), "approved") {
		t.Fatalf("events %s: %v", types(evs), last(evs))
	}
}

func TestReconnectWithoutANewMessageReportsNothingAgainAndSendsNothing(t *testing.T) {
	f, _ := deskFake()
	h := newHandler(t, f)
	first := firstTurn(t, h)
	evs := events(t, post(t, h, input("t1", snapshotMessages(t, first))))
	if got := types(evs); got != "RUN_STARTED STATE_SNAPSHOT MESSAGES_SNAPSHOT RUN_FINISHED" {
		t.Fatalf("reconnect: %s", got)
	}
	if its := interruptsOfFinish(t, last(evs)); len(its) != 1 || its[0]["toolCallId"] != "c-2" {
		t.Fatalf("interrupts %v", its)
	}
	if len(f.messages) != 0 || len(f.starts) != 1 || len(f.decisions) != 0 {
		t.Fatalf("a reconnect sent messages %v, starts %d, decisions %v", f.messages, len(f.starts), f.decisions)
	}
	// A client that lost its history gets the turn's calls again, as new.
	evs = events(t, post(t, h, input("t1", []json.RawMessage{userMsg("u1", goal)})))
	if !strings.Contains(types(evs), "TOOL_CALL_START(c-1)") || !strings.Contains(types(evs), "TOOL_CALL_RESULT(c-1)") || len(f.messages) != 0 {
		t.Fatalf("reconnect without the calls: %s, messages %v", types(evs), f.messages)
	}
}

func TestANewMessageGoesToTheRunAndTheStreamFollowsItsTurn(t *testing.T) {
	f, _ := deskFake()
	h := newHandler(t, f)
	first := firstTurn(t, h)
	evs := events(t, post(t, h, input("t1", snapshotMessages(t, first), approve(t, first))))
	f.onMessage = func(r *fakeRun, text string) {
		r.st.Queued++
		r.steps = []func(*fakeRun){
			func(r *fakeRun) { r.st.Queued--; r.st.Turn++; r.st.Status = workflows.StatusRunning },
			func(r *fakeRun) {
				r.add(workflows.TraceRecord{CallID: "c-3", Tool: "search_tickets", Args: json.RawMessage(readArgs), Status: workflows.TraceCacheHit, Result: json.RawMessage(readOut)})
			},
			func(r *fakeRun) { r.st.Status, r.st.Answer = workflows.StatusWaitingForInput, "it was closed" },
		}
	}
	msgs := append(snapshotMessages(t, evs), userMsg("u2", "is it closed?"))
	evs = events(t, post(t, h, input("t1", msgs)))
	want := "RUN_STARTED TOOL_CALL_START(c-3) TOOL_CALL_ARGS(c-3) TOOL_CALL_END(c-3) TOOL_CALL_RESULT(c-3) TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END STATE_SNAPSHOT MESSAGES_SNAPSHOT RUN_FINISHED"
	if got := types(evs); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	if len(f.messages) != 1 || f.messages[0] != "is it closed?" || evs[5].str("messageId") != "answer-2" {
		t.Fatalf("messages %v, answer %v", f.messages, evs[5])
	}
	// Sent again (the stream was lost): the run has seen it, so it is a reconnect.
	evs = events(t, post(t, h, input("t1", msgs)))
	if len(f.messages) != 1 || !strings.Contains(types(evs), "TOOL_CALL_RESULT(c-3)") {
		t.Fatalf("the same post again sent %v: %s", f.messages, types(evs))
	}
}

func TestANewMessageWhileCallsWaitIsRefused(t *testing.T) {
	f, _ := deskFake()
	h := newHandler(t, f)
	first := firstTurn(t, h)
	evs := events(t, post(t, h, input("t1", append(snapshotMessages(t, first), userMsg("u2", "and another")))))
	if types(evs) != "RUN_ERROR" || last(evs).str("code") != "interrupts_open" || !strings.Contains(last(evs).str("message"), "resume them first") {
		t.Fatalf("events %s %v", types(evs), last(evs))
	}
	if len(f.messages) != 0 {
		t.Fatalf("sent %v", f.messages)
	}
}

func TestThreadsOfOtherDoorsAndClosedRunsAreRefused(t *testing.T) {
	for _, c := range []struct {
		info RunInfo
		code string
	}{
		{RunInfo{Running: true, Door: ""}, "foreign_thread"},
		{RunInfo{Running: true, Door: "mcp"}, "foreign_thread"},
		{RunInfo{Running: false, Door: Door}, "run_closed"},
	} {
		f := newFake()
		f.runs["agui-t1"] = &fakeRun{info: c.info, st: workflows.State{Status: workflows.StatusWaitingForInput, Turn: 1}}
		h := newHandler(t, f)
		evs := events(t, post(t, h, input("t1", []json.RawMessage{userMsg("u1", "hi"), userMsg("u2", "close TKT-1")})))
		if types(evs) != "RUN_ERROR" || last(evs).str("code") != c.code {
			t.Fatalf("%+v: %s %v", c.info, types(evs), last(evs))
		}
		if len(f.messages)+len(f.starts) != 0 {
			t.Fatalf("%+v: sent %v, started %v", c.info, f.messages, f.starts)
		}
	}
}

func TestAThreadWithoutARunStartsWithOneMessage(t *testing.T) {
	f, _ := deskFake()
	h := newHandler(t, f)
	for _, c := range []struct {
		msgs []json.RawMessage
		code string
	}{
		{nil, "no_run"},
		{[]json.RawMessage{userMsg("u1", "a"), userMsg("u2", "b")}, "too_many_messages"},
	} {
		evs := events(t, post(t, h, input("t1", c.msgs)))
		if types(evs) != "RUN_ERROR" || last(evs).str("code") != c.code {
			t.Fatalf("%s %v", types(evs), last(evs))
		}
	}
	if len(f.starts) != 0 {
		t.Fatalf("started %v", f.starts)
	}
}

func TestAFailedRunEndsTheStreamWithItsError(t *testing.T) {
	f := newFake()
	f.onStart = func(r *fakeRun) {
		r.steps = []func(*fakeRun){func(r *fakeRun) {}, func(r *fakeRun) { r.st.Status, r.st.Error = workflows.StatusFailed, "planner: no model" }}
	}
	evs := events(t, post(t, newHandler(t, f), input("t1", []json.RawMessage{userMsg("u1", goal)})))
	if types(evs) != "RUN_STARTED RUN_ERROR" || last(evs).str("code") != "run_failed" || !strings.Contains(last(evs).str("message"), "planner: no model") {
		t.Fatalf("%s %v", types(evs), last(evs))
	}
}

func TestOutcomesSayWhatHappened(t *testing.T) {
	for _, c := range []struct {
		rec  workflows.TraceRecord
		want string
	}{
		{workflows.TraceRecord{Status: workflows.TraceRejected, Approver: "bob", Reason: "wrong ticket"}, "not executed: rejected by bob: wrong ticket"},
		{workflows.TraceRecord{Status: workflows.TraceCancelled, Approver: "agui"}, "not executed: cancelled by agui"},
		{workflows.TraceRecord{Status: workflows.TraceExpired, Reason: "no decision within 24h0m0s: treated as rejected"}, "not executed: expired: no decision within 24h0m0s: treated as rejected"},
		{workflows.TraceRecord{Status: workflows.TraceBlocked, Error: "denied by rule no-test-refunds of the worker's policy"}, "not executed: blocked: denied by rule no-test-refunds of the worker's policy"},
		{workflows.TraceRecord{Status: workflows.TraceError, Error: "desk down"}, "failed: desk down"},
		{workflows.TraceRecord{Status: workflows.TraceFallback, Error: "desk down", Reason: "falling back to search_archive as c-4"}, "failed: desk down; fell back to search_archive as c-4"},
		{workflows.TraceRecord{Status: workflows.TraceResponded, Result: json.RawMessage(`{"answer":42}`)}, `{"answer":42}`},
		{workflows.TraceRecord{Status: workflows.TraceCacheHit, Result: json.RawMessage(readOut)}, readOut},
	} {
		if got := outcomeText(&c.rec); got != c.want {
			t.Errorf("%s: %q, want %q", c.rec.Status, got, c.want)
		}
	}
}

func TestARejectedCallsResultSaysWhoRejectedItAndWhy(t *testing.T) {
	f, closed := deskFake()
	h := newHandler(t, f)
	first := firstTurn(t, h)
	reject := approve(t, first)
	reject["payload"] = map[string]any{"approved": false, "reason": "wrong ticket"}
	reject["metadata"] = map[string]any{"approver": "bob"}
	evs := events(t, post(t, h, input("t1", snapshotMessages(t, first), reject)))
	if evs[1].str("type") != evToolCallResult || evs[1].str("content") != "not executed: rejected by bob: wrong ticket" || *closed != 0 {
		t.Fatalf("%s: %v (closed %d)", types(evs), evs[1], *closed)
	}
	if d := f.decisions[0]; d.how != "reject" || d.in.Reason != "wrong ticket" || d.in.Approver != "bob" || d.in.Cancel {
		t.Fatalf("decision %+v", d)
	}
}

// TestAStreamStopsWhenTheClientGoesAway: a run that never ends, a client
// that leaves after the first event: the handler returns.
func TestAStreamStopsWhenTheClientGoesAway(t *testing.T) {
	f := newFake()
	f.onStart = func(r *fakeRun) {}
	var active atomic.Int32
	h := newHandler(t, f)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		active.Add(1)
		defer active.Add(-1)
		r.Host = "example.test"
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	body, _ := json.Marshal(input("t1", []json.RawMessage{userMsg("u1", goal)}))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+Path, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil || !strings.Contains(string(buf), "RUN_STARTED") {
		t.Fatalf("first read %q: %v", buf, err)
	}
	if active.Load() != 1 {
		t.Fatal("the stream is not open")
	}
	cancel()
	_ = resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for active.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the handler still streams after the client went away")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAStreamEndsAfterMaxStream(t *testing.T) {
	f := newFake()
	f.onStart = func(r *fakeRun) {}
	h := newHandler(t, f, func(o *Options) { o.MaxStream = 20 * time.Millisecond })
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- post(t, h, input("t1", []json.RawMessage{userMsg("u1", goal)})) }()
	select {
	case rec := <-done:
		evs := events(t, rec)
		if types(evs) != "RUN_STARTED RUN_ERROR" || last(evs).str("code") != "stream_timeout" {
			t.Fatalf("%s %v", types(evs), last(evs))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream is still open after MaxStream")
	}
}

// A notification's record is who was told, not what became of the call: a
// call blocked by the deny policy, told of afterwards, still ends blocked.
func TestNotificationRecordsAreNoCallsOutcome(t *testing.T) {
	trace := []workflows.TraceRecord{
		{Seq: 1, Turn: 1, CallID: "c-1", Tool: "close_ticket", Args: []byte(`{"ticket_id":"TKT-3"}`), Status: workflows.TraceBlocked, Error: "call refused by the deny policy: needs confirmation"},
		{Seq: 2, Turn: 1, CallID: "c-1", Tool: "close_ticket", Status: workflows.TraceNotified, Reason: "ops (webhook) blocked: HTTP 200"},
	}
	calls := callsOf(trace, workflows.State{Turn: 1}, 1)
	if len(calls) != 1 || calls[0].last == nil || calls[0].last.Status != workflows.TraceBlocked {
		t.Fatalf("calls %+v, want c-1 whose last record is its block", calls)
	}
	if got := outcomeText(calls[0].last); got != "not executed: blocked: call refused by the deny policy: needs confirmation" {
		t.Errorf("outcome %q", got)
	}
}
