package agui

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/plan"
)

func newHandler(t *testing.T, b Backend, edit ...func(*Options)) *Handler {
	t.Helper()
	o := Options{Backend: b, Planner: plan.Config{Kind: plan.KindSupport}, Hosts: []string{"example.test"}, Poll: time.Millisecond}
	for _, e := range edit {
		e(&o)
	}
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	h.reflect, h.errGrace = time.Second, 50*time.Millisecond
	return h
}

// input is a RunAgentInput as HttpAgent sends it.
func input(thread string, messages []json.RawMessage, resume ...map[string]any) map[string]any {
	if messages == nil {
		messages = []json.RawMessage{}
	}
	in := map[string]any{"threadId": thread, "runId": "run-1", "protocolVersion": "1.0", "tools": []any{}, "context": []any{},
		"forwardedProps": map[string]any{}, "state": map[string]any{}, "messages": messages}
	if len(resume) > 0 {
		in["resume"] = resume
	}
	return in
}

func userMsg(id, text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"id": id, "role": "user", "content": text})
	return b
}

// post sends body (marshalled unless a string) as HttpAgent does, with
// header edits, and returns the response.
func post(t *testing.T, h http.Handler, body any, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	var raw []byte
	if s, ok := body.(string); ok {
		raw = []byte(s)
	} else {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "http://example.test"+Path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

type event map[string]any

func (e event) str(k string) string { s, _ := e[k].(string); return s }

// events parses an SSE body, and checks the order the AG-UI client's
// verifier enforces.
func events(t *testing.T, rec *httptest.ResponseRecorder) []event {
	t.Helper()
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d %q: %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
	}
	var out []event
	sc := bufio.NewScanner(strings.NewReader(rec.Body.String()))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var e event
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		out = append(out, e)
	}
	verifyOrder(t, out)
	return out
}

// verifyOrder is the client verifier's rules this endpoint can break.
func verifyOrder(t *testing.T, evs []event) {
	t.Helper()
	openCalls, openText := map[string]bool{}, map[string]bool{}
	for i, e := range evs {
		typ := e.str("type")
		switch {
		case i == 0 && typ != evRunStarted && typ != evRunError:
			t.Fatalf("first event %s: want RUN_STARTED or RUN_ERROR", typ)
		case i > 0 && (evs[i-1].str("type") == evRunFinished || evs[i-1].str("type") == evRunError):
			t.Fatalf("%s after the run ended", typ)
		}
		switch typ {
		case evToolCallStart:
			openCalls[e.str("toolCallId")] = true
		case evToolCallArgs:
			if !openCalls[e.str("toolCallId")] {
				t.Fatalf("TOOL_CALL_ARGS of %s, not open", e.str("toolCallId"))
			}
		case evToolCallEnd:
			if !openCalls[e.str("toolCallId")] {
				t.Fatalf("TOOL_CALL_END of %s, not open", e.str("toolCallId"))
			}
			delete(openCalls, e.str("toolCallId"))
		case evTextStart:
			openText[e.str("messageId")] = true
		case evTextContent, evTextEnd:
			if !openText[e.str("messageId")] {
				t.Fatalf("%s of %s, not open", typ, e.str("messageId"))
			}
			if typ == evTextEnd {
				delete(openText, e.str("messageId"))
			}
		case evRunFinished:
			if len(openCalls)+len(openText) > 0 {
				t.Fatalf("RUN_FINISHED with open calls %v or text %v", openCalls, openText)
			}
		}
	}
}

func types(evs []event) string {
	var out []string
	for _, e := range evs {
		s := e.str("type")
		if id := e.str("toolCallId"); id != "" {
			s += "(" + id + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func last(evs []event) event { return evs[len(evs)-1] }

// snapshotMessages are the messages of a stream's MESSAGES_SNAPSHOT: what
// the client holds, and sends with its next post.
func snapshotMessages(t *testing.T, evs []event) []json.RawMessage {
	t.Helper()
	for _, e := range evs {
		if e.str("type") == evMessagesSnapshot {
			var out []json.RawMessage
			b, _ := json.Marshal(e["messages"])
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatalf("no MESSAGES_SNAPSHOT in %s", types(evs))
	return nil
}

// interruptsOfFinish are the interrupts of a RUN_FINISHED.
func interruptsOfFinish(t *testing.T, e event) []map[string]any {
	t.Helper()
	o, _ := e["outcome"].(map[string]any)
	if e.str("type") != evRunFinished || o["type"] != "interrupt" {
		t.Fatalf("want RUN_FINISHED with an interrupt outcome, got %v", e)
	}
	var out []map[string]any
	for _, it := range o["interrupts"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

// callerToken is the bearer token callers gives its caller.
const callerToken = "tg_caller"

// callers sets Options.Callers to one caller, name with key, whose token is
// callerToken.
func callers(name string, key ed25519.PrivateKey) func(*Options) {
	return func(o *Options) {
		o.Callers = func(token string) (Caller, bool) {
			if token != callerToken {
				return Caller{}, false
			}
			return Caller{Name: name, Key: key}, true
		}
	}
}

// asCaller sends every request to h with token as its bearer.
func asCaller(h http.Handler, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+token)
		h.ServeHTTP(w, r)
	})
}
