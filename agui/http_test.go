package agui

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/plan"
)

func TestRequestsTheEndpointCannotTakeAreRefusedWithWhy(t *testing.T) {
	f, _ := deskFake()
	h := newHandler(t, f, func(o *Options) { o.Origins = []string{"https://app.example"} })
	ok := input("t1", []json.RawMessage{userMsg("u1", goal)})
	okBody, _ := json.Marshal(ok)
	with := func(k string, v any) map[string]any {
		m := input("t1", []json.RawMessage{userMsg("u1", goal)})
		m[k] = v
		return m
	}
	msg := func(m string) map[string]any { return with("messages", []json.RawMessage{json.RawMessage(m)}) }
	for _, c := range []struct {
		name   string
		body   any
		hdr    []string
		status int
		why    string
	}{
		{"unknown host", ok, []string{"Host", "evil.test"}, 403, `host "evil.test"`},
		{"a page of another site", ok, []string{"Origin", "https://evil.test"}, 403, `origin "https://evil.test"`},
		{"origin null", ok, []string{"Origin", "null"}, 403, "origin"},
		{"a form's content type", ok, []string{"Content-Type", "text/plain"}, 415, "application/json"},
		{"no content type", ok, []string{"Content-Type", ""}, 415, "application/json"},
		{"latin-1", ok, []string{"Content-Type", "application/json; charset=latin1"}, 415, "UTF-8"},
		{"not an event stream", ok, []string{"Accept", "application/json"}, 406, "text/event-stream"},
		{"too large", `{"threadId":"t1","runId":"r","messages":[],"state":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, nil, 413, "at most"},
		{"an unknown field", with("agent", "x"), nil, 400, `"agent"`},
		{"a field in another case", with("ThreadID", "t2"), nil, 400, "ThreadID"},
		{"a key twice", strings.Replace(string(okBody), `"runId":"run-1"`, `"runId":"run-1","runId":"run-2"`, 1), nil, 400, "runId"},
		{"data after the value", string(okBody) + `{}`, nil, 400, "after"},
		{"no messages", `{"threadId":"t1","runId":"r"}`, nil, 400, "messages is required"},
		{"a message field no role has", msg(`{"id":"u1","role":"user","content":"hi","toolCallId":"c-1"}`), nil, 400, `"toolCallId"`},
		{"an unknown message field", msg(`{"id":"u1","role":"user","content":"hi","x":1}`), nil, 400, "x"},
		{"an unknown role", msg(`{"id":"u1","role":"admin","content":"hi"}`), nil, 400, "role"},
		{"an image", msg(`{"id":"u1","role":"user","content":[{"type":"image","source":{"type":"url","value":"http://x"}}]}`), nil, 400, "text parts"},
		{"an empty user message", msg(`{"id":"u1","role":"user","content":"  "}`), nil, 400, "without text"},
		{"an oversized user message", msg(`{"id":"u1","role":"user","content":"` + strings.Repeat("x", 9000) + `"}`), nil, 400, "at most 8192"},
		{"two messages of one id", with("messages", []json.RawMessage{userMsg("u1", "a"), userMsg("u1", "b")}), nil, 400, "unique"},
		{"an unknown resume field", with("resume", []any{map[string]any{"interruptId": "c-1:gate:0123456789abcdef", "status": "resolved", "payload": map[string]any{"approved": true, "force": true}}}), nil, 400, "force"},
		{"a resume without approved", with("resume", []any{map[string]any{"interruptId": "c-1:gate:0123456789abcdef", "status": "resolved", "payload": map[string]any{}}}), nil, 400, "approved is required"},
		{"a resume status", with("resume", []any{map[string]any{"interruptId": "c-1:gate:0123456789abcdef", "status": "done"}}), nil, 400, "status"},
		{"an interrupt id of no interrupt", with("resume", []any{map[string]any{"interruptId": "x", "status": "cancelled"}}), nil, 400, "interruptId"},
		{"an interrupt answered twice", with("resume", []any{map[string]any{"interruptId": "c-1:gate:0123456789abcdef", "status": "cancelled"}, map[string]any{"interruptId": "c-1:gate:0123456789abcdef", "status": "cancelled"}}), nil, 400, "once"},
		{"too many resume entries", with("resume", make([]any, MaxResumeEntries+1)), nil, 400, "at most"},
		{"too many messages", with("messages", make([]any, MaxMessages+1)), nil, 400, "at most"},
		{"a rejection with edited arguments", with("resume", []any{map[string]any{"interruptId": "c-1:gate:0123456789abcdef", "status": "resolved", "payload": map[string]any{"approved": false, "editedArgs": map[string]any{}}}}), nil, 400, "approved true"},
	} {
		rec := post(t, h, c.body, c.hdr...)
		if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.why) {
			t.Errorf("%s: %d %q, want %d saying %q", c.name, rec.Code, rec.Body.String(), c.status, c.why)
		}
		if rec.Header().Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: CORS headers on a refusal", c.name)
		}
	}
	if len(f.starts)+len(f.messages)+len(f.decisions) != 0 {
		t.Fatalf("a refused request reached the run: %v %v %v", f.starts, f.messages, f.decisions)
	}
}

func TestThreadAndRunIDsAreValidated(t *testing.T) {
	f, _ := deskFake()
	h := newHandler(t, f)
	for _, id := range []string{"", "../x", "a b", "-x", ".x", "x/y", "agui-x\n", strings.Repeat("x", 101), "é"} {
		rec := post(t, h, input(id, []json.RawMessage{userMsg("u1", goal)}))
		if rec.Code != 400 || !strings.Contains(rec.Body.String(), "threadId") {
			t.Errorf("threadId %q: %d %s", id, rec.Code, rec.Body.String())
		}
	}
	body := input("t1", []json.RawMessage{userMsg("u1", goal)})
	body["runId"] = "run 1"
	if rec := post(t, h, body); rec.Code != 400 || !strings.Contains(rec.Body.String(), "runId") {
		t.Errorf("runId: %d %s", rec.Code, rec.Body.String())
	}
	if len(f.starts) != 0 {
		t.Fatalf("started %v", f.starts)
	}
	if rec := post(t, h, input(strings.Repeat("x", 100), []json.RawMessage{userMsg("u1", goal)})); rec.Code != 200 || len(f.starts) != 1 {
		t.Fatalf("a 100-character thread id: %d %s", rec.Code, rec.Body.String())
	}
	if _, ok := f.runs["agui-"+strings.Repeat("x", 100)]; !ok {
		t.Fatalf("runs %v", f.runs)
	}
}

func TestOnlyPostAndPreflightsOfAllowedOrigins(t *testing.T) {
	f, _ := deskFake()
	h := newHandler(t, f, func(o *Options) { o.Origins = []string{"https://app.example"} })
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(m, "http://example.test"+Path, nil))
		if rec.Code != 405 || rec.Header().Get("Allow") != "POST, OPTIONS" || !strings.Contains(rec.Body.String(), "POST") {
			t.Errorf("%s: %d %s", m, rec.Code, rec.Body.String())
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "http://example.test/other", nil))
	if rec.Code != 404 {
		t.Errorf("another path: %d", rec.Code)
	}
	preflight := func(origin string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodOptions, "http://example.test"+Path, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := preflight("https://app.example"); rec.Code != 204 || rec.Header().Get("Access-Control-Allow-Origin") != "https://app.example" ||
		rec.Header().Get("Access-Control-Allow-Methods") != "POST" || !strings.Contains(rec.Header().Get("Access-Control-Allow-Headers"), "Content-Type") {
		t.Errorf("allowed preflight: %d %v", rec.Code, rec.Header())
	}
	if rec := preflight("https://evil.test"); rec.Code != 403 || rec.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("refused preflight: %d %v", rec.Code, rec.Header())
	}
	ok := input("t1", []json.RawMessage{userMsg("u1", goal)})
	if rec := post(t, h, ok, "Origin", "https://app.example"); rec.Code != 200 || rec.Header().Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("allowed origin: %d %v", rec.Code, rec.Header())
	}
	if rec := post(t, h, input("t2", []json.RawMessage{userMsg("u1", goal)}), "Origin", "http://example.test"); rec.Code != 200 || rec.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("same origin: %d %v", rec.Code, rec.Header())
	}
}

func TestTooManyStreamsAreRefused(t *testing.T) {
	f, _ := deskFake()
	h := newHandler(t, f, func(o *Options) { o.MaxStreams = 1 })
	h.streams <- struct{}{} // one stream open
	rec := post(t, h, input("t1", []json.RawMessage{userMsg("u1", goal)}))
	if rec.Code != 429 || rec.Header().Get("Retry-After") == "" || len(f.starts) != 0 {
		t.Fatalf("%d %s", rec.Code, rec.Body.String())
	}
}

func TestNewRefusesWhatItCannotServe(t *testing.T) {
	b := newFake()
	for _, o := range []Options{
		{Planner: plan.Config{Kind: plan.KindSupport}, Hosts: []string{"h"}},
		{Backend: b, Planner: plan.Config{Kind: plan.KindSupport}},
		{Backend: b, Planner: plan.Config{Kind: plan.KindExternal}, Hosts: []string{"h"}},
		{Backend: b, Hosts: []string{"h"}},
		{Backend: b, Planner: plan.Config{Kind: plan.KindSupport}, Hosts: []string{"h"}, Origins: []string{"app.example"}},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) took it", o)
		}
	}
}

// TestABodyOfUnknownLengthIsCutAtMaxBodyBytes: a chunked body names no
// Content-Length; it is read up to the bound.
func TestABodyOfUnknownLengthIsCutAtMaxBodyBytes(t *testing.T) {
	f, _ := deskFake()
	h := newHandler(t, f)
	body := `{"threadId":"t1","runId":"r","messages":[],"state":"` + strings.Repeat("x", MaxBodyBytes) + `"}`
	req := httptest.NewRequest(http.MethodPost, "http://example.test"+Path, io.NopCloser(strings.NewReader(body)))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 413 || !strings.Contains(rec.Body.String(), "more than") {
		t.Fatalf("%d %s", rec.Code, rec.Body.String())
	}
}

func TestGuardKeepsAPageBehindTheHostCheck(t *testing.T) {
	h := newHandler(t, newFake())
	page := h.Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "page") }))
	for host, want := range map[string]int{"example.test": 200, "evil.test": 403} {
		req := httptest.NewRequest(http.MethodGet, "http://example.test/", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		page.ServeHTTP(rec, req)
		if rec.Code != want || (want == 200) != (rec.Body.String() == "page") {
			t.Errorf("host %s: %d %q", host, rec.Code, rec.Body.String())
		}
	}
}
