package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	aguipage "github.com/toolgate/toolgate/examples/agui"
)

// fakeAGUI is an AG-UI endpoint that plays two requests: the first ends on
// two interrupts, the second (the resume) with a result and an answer. It
// keeps every RunAgentInput it got, for the test to read what the page sent.
type fakeAGUI struct {
	mu     sync.Mutex
	inputs []map[string]any
}

func (f *fakeAGUI) got() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.inputs...)
}

func (f *fakeAGUI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in map[string]any
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.inputs = append(f.inputs, in)
	n := len(f.inputs)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(e map[string]any) {
		b, _ := json.Marshal(e)
		fmt.Fprintf(w, "data: %s\r\n\r\n", b) // CRLF: the page must split on either
		w.(http.Flusher).Flush()
	}
	send(map[string]any{"type": "RUN_STARTED", "threadId": in["threadId"], "runId": in["runId"]})
	if n == 1 {
		send(map[string]any{"type": "TOOL_CALL_START", "toolCallId": "c-1", "toolCallName": "search_tickets", "parentMessageId": "calls-c-1"})
		for _, part := range []string{`{"query":`, `"<b>login</b>"}`} { // arguments in two deltas, with markup
			send(map[string]any{"type": "TOOL_CALL_ARGS", "toolCallId": "c-1", "delta": part})
		}
		send(map[string]any{"type": "TOOL_CALL_END", "toolCallId": "c-1"})
		send(map[string]any{"type": "TOOL_CALL_RESULT", "messageId": "result-c-1", "toolCallId": "c-1", "role": "tool",
			"content": `{"tickets":[{"id":"TKT-3","title":"<img src=x onerror=window.pwned=1>"}]}`})
		var its []any
		for _, c := range []string{"c-2", "c-3"} {
			send(map[string]any{"type": "TOOL_CALL_START", "toolCallId": c, "toolCallName": "close_ticket", "parentMessageId": "calls-" + c})
			send(map[string]any{"type": "TOOL_CALL_ARGS", "toolCallId": c, "delta": `{"ticket_id":"TKT-3"}`})
			send(map[string]any{"type": "TOOL_CALL_END", "toolCallId": c})
			its = append(its, map[string]any{"id": c + ":gate:0123456789abcdef", "reason": "tool_call", "toolCallId": c,
				"message": "<i>close_ticket</i> waits", "expiresAt": "2099-01-01T00:00:00Z",
				"metadata": map[string]any{"tool": "close_ticket", "kind": "gate", "args_digest": "0123456789abcdef", "call_args": map[string]any{"ticket_id": "TKT-3"}}})
		}
		send(map[string]any{"type": "STATE_SNAPSHOT", "snapshot": map[string]any{"status": "waiting_for_approval", "turn": 1, "calls": 3}})
		send(map[string]any{"type": "RUN_FINISHED", "threadId": in["threadId"], "runId": in["runId"], "outcome": map[string]any{"type": "interrupt", "interrupts": its}})
		return
	}
	send(map[string]any{"type": "TOOL_CALL_RESULT", "messageId": "result-c-2", "toolCallId": "c-2", "content": `{"status":"closed"}`, "role": "tool"})
	send(map[string]any{"type": "TEXT_MESSAGE_START", "messageId": "answer-1", "role": "assistant"})
	for _, part := range []string{"Closed ", "TKT-3."} {
		send(map[string]any{"type": "TEXT_MESSAGE_CONTENT", "messageId": "answer-1", "delta": part})
	}
	send(map[string]any{"type": "TEXT_MESSAGE_END", "messageId": "answer-1"})
	send(map[string]any{"type": "RUN_FINISHED", "threadId": in["threadId"], "runId": in["runId"], "outcome": map[string]any{"type": "success"}})
}

// The example page's side of the protocol, against a fake endpoint: two
// interrupts are two cards, and the page resumes once, only when both have
// an answer, with both answers; it sends back the messages it kept (the
// user's, the assistant's tool calls with their arguments joined from the
// deltas, the tool result), the same thread id and a new run id; markup in
// arguments, results and interrupt messages is shown as text.
func TestAGUIPageAnswersEveryCard(t *testing.T) {
	ctx := browser(t)
	fake := &fakeAGUI{}
	mux := http.NewServeMux()
	mux.Handle("/", aguipage.Handler())
	mux.Handle("/agui", fake)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	browse(t, ctx, "open the page", chromedp.Navigate(srv.URL+"/"))
	browse(t, ctx, "send", chromedp.SendKeys(chromedp.CSS("#message"), "find the login ticket and close it"),
		chromedp.Click(chromedp.CSS("#send")))
	await(t, ctx, "two cards", `document.querySelectorAll('.interrupt').length === 2`)
	browse(t, ctx, "approve the first", chromedp.Click(chromedp.CSS(openCard+" .approve")))
	if n := len(fake.got()); n != 1 {
		t.Fatalf("the page sent %d requests after one of two answers, want none yet", n-1)
	}
	browse(t, ctx, "reject the second", chromedp.SendKeys(chromedp.CSS(openCard+" .reason"), "one is enough"),
		chromedp.Click(chromedp.CSS(openCard+" .reject")))
	await(t, ctx, "the answer", `[...document.querySelectorAll('.assistant')].some((e) => e.textContent === 'Closed TKT-3.')`)

	in := fake.got()
	if len(in) != 2 {
		t.Fatalf("the page sent %d requests, want 2", len(in))
	}
	if in[0]["threadId"] != in[1]["threadId"] || in[0]["runId"] == in[1]["runId"] {
		t.Errorf("thread ids %v, %v (want one) and run ids %v, %v (want two)", in[0]["threadId"], in[1]["threadId"], in[0]["runId"], in[1]["runId"])
	}
	resume, _ := json.Marshal(in[1]["resume"])
	want := `[{"interruptId":"c-2:gate:0123456789abcdef","payload":{"approved":true},"status":"resolved"},` +
		`{"interruptId":"c-3:gate:0123456789abcdef","payload":{"approved":false,"reason":"one is enough"},"status":"resolved"}]`
	if string(resume) != want {
		t.Errorf("the resume:\n got  %s\n want %s", resume, want)
	}
	msgs, _ := json.Marshal(in[1]["messages"])
	for _, w := range []string{`"content":"find the login ticket and close it"`, `"role":"user"`, `"id":"calls-c-1"`,
		`"arguments":"{\"query\":\"\u003cb\u003elogin\u003c/b\u003e\"}"`, `"id":"result-c-1"`, `"toolCallId":"c-1"`, `"id":"calls-c-3"`} {
		if !strings.Contains(string(msgs), w) {
			t.Errorf("the messages the page sent back lack %s:\n%s", w, msgs)
		}
	}
	if _, ok := in[0]["resume"]; ok {
		t.Errorf("the first request carried a resume: %v", in[0]["resume"])
	}
	pwned := read(t, ctx, "window.pwned", chromedp.Evaluate[int](`window.pwned === undefined ? 0 : 1`))
	parsed := read(t, ctx, "markup elements", chromedp.Evaluate[int](`document.querySelectorAll('#log img, #log b, #log i').length`))
	shown := read(t, ctx, "the log", chromedp.TextContent(chromedp.CSS("#log")))
	if pwned != 0 || parsed != 0 || !strings.Contains(shown, `"<b>login</b>"`) || !strings.Contains(shown, "<i>close_ticket</i> waits") {
		t.Errorf("markup from the server ran or was parsed (pwned %d, %d elements), or is not shown as text:\n%s", pwned, parsed, shown)
	}
}
