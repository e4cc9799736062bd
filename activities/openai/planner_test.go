package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
)

const testKey = "sk-proj-T3stK3y0nlyF0rUn1tT3sts9x8y7z6"

// ---------------------------------------------------------------------------
// A local server that speaks the Chat Completions protocol and replays
// recorded responses from testdata/.

type reply struct {
	status int
	file   string // under testdata/; {{authorization}} is replaced by the request's header
	body   string // used when file is empty
	ctype  string // default application/json
	header map[string]string
	delay  time.Duration
}

type received struct {
	method string
	path   string
	auth   string
	body   []byte
}

type fakeServer struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	replies []reply
	reqs    []received
}

func newFakeServer(t *testing.T, replies ...reply) *fakeServer {
	t.Helper()
	f := &fakeServer{t: t, replies: replies}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the base URL clients are given (with the usual /v1 prefix).
func (f *fakeServer) URL() string { return f.srv.URL + "/v1" }

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, received{method: r.Method, path: r.URL.Path, auth: r.Header.Get("Authorization"), body: body})
	var rep reply
	ok := len(f.replies) > 0
	if ok {
		rep, f.replies = f.replies[0], f.replies[1:]
	}
	f.mu.Unlock()

	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		f.t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error","param":null,"code":null}}`, http.StatusNotFound)
		return
	}
	if !ok {
		f.t.Errorf("unexpected extra request")
		http.Error(w, `{"error":{"message":"no reply scripted","type":"server_error","param":null,"code":null}}`, http.StatusInternalServerError)
		return
	}
	if rep.delay > 0 {
		select {
		case <-time.After(rep.delay):
		case <-r.Context().Done():
			return
		}
	}
	text := rep.body
	if rep.file != "" {
		b, err := os.ReadFile(filepath.Join("testdata", rep.file))
		if err != nil {
			f.t.Errorf("reading testdata: %v", err)
		}
		text = string(b)
	}
	text = strings.ReplaceAll(text, "{{authorization}}", r.Header.Get("Authorization"))
	text = strings.ReplaceAll(text, "{{key}}", strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	ctype := rep.ctype
	if ctype == "" {
		ctype = "application/json"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("X-Request-Id", "req_3f2a9c0d6b1e4a7f8c5d2e9b0a1c3d4e")
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	status := rep.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text)
}

func (f *fakeServer) requests() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.reqs...)
}

// The request body as the endpoint sees it.
type wireRequest struct {
	Model             string        `json:"model"`
	Messages          []wireMessage `json:"messages"`
	Tools             []wireTool    `json:"tools"`
	ParallelToolCalls *bool         `json:"parallel_tool_calls"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func (m wireMessage) text(t *testing.T) string {
	t.Helper()
	if len(m.Content) == 0 {
		return ""
	}
	var s string
	require.NoError(t, json.Unmarshal(m.Content, &s), "content %s", m.Content)
	return s
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

func decodeRequest(t *testing.T, r received) wireRequest {
	t.Helper()
	var w wireRequest
	require.NoError(t, json.Unmarshal(r.body, &w), "request body %s", r.body)
	return w
}

// ---------------------------------------------------------------------------
// Running the planner as an activity.

// memLogger records log lines (a Temporal log.Logger).
type memLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *memLogger) add(level, msg string, kv []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	b.WriteString(level + " " + msg)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, " %v=%v", kv[i], kv[i+1])
	}
	l.lines = append(l.lines, b.String())
}
func (l *memLogger) Debug(msg string, kv ...any) { l.add("DEBUG", msg, kv) }
func (l *memLogger) Info(msg string, kv ...any)  { l.add("INFO", msg, kv) }
func (l *memLogger) Warn(msg string, kv ...any)  { l.add("WARN", msg, kv) }
func (l *memLogger) Error(msg string, kv ...any) { l.add("ERROR", msg, kv) }

func (l *memLogger) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

type harness struct {
	env    *testsuite.TestActivityEnvironment
	logger *memLogger
}

func newHarness(p *Planner) *harness {
	var suite testsuite.WorkflowTestSuite
	h := &harness{logger: &memLogger{}}
	suite.SetLogger(h.logger)
	h.env = suite.NewTestActivityEnvironment()
	h.env.RegisterActivityWithOptions(p.Plan, activity.RegisterOptions{Name: plan.ActivityName(plan.KindOpenAI)})
	return h
}

func (h *harness) plan(t *testing.T, req plan.Request) (plan.Decision, error) {
	t.Helper()
	val, err := h.env.ExecuteActivity(plan.ActivityName(plan.KindOpenAI), req)
	if err != nil {
		return plan.Decision{}, err
	}
	var d plan.Decision
	require.NoError(t, val.Get(&d))
	return d, nil
}

// isolateEnv keeps the developer's OPENAI_* variables out of a test.
func isolateEnv(t *testing.T) {
	for _, k := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "OPENAI_ORG_ID",
		"OPENAI_PROJECT_ID", "OPENAI_ADMIN_KEY", "OPENAI_CUSTOM_HEADERS"} {
		t.Setenv(k, "")
	}
}

func newTestPlanner(t *testing.T, f *fakeServer) *Planner {
	t.Helper()
	isolateEnv(t)
	return New(Options{BaseURL: f.URL(), APIKey: testKey, Model: "gpt-4o-mini", Timeout: 5 * time.Second})
}

var testTools = []plan.ToolInfo{
	{
		Name:        "search_tickets",
		Description: "Search support tickets.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":50}},"required":["query"],"additionalProperties":false}`),
	},
	{
		Name:        "close_ticket",
		Description: "Close a ticket.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"ticket_id":{"type":"string"},"note":{"type":"string"}},"required":["ticket_id"]}`),
		Destructive: true,
	},
	{Name: "get_time", Description: "The current time."},
}

func goalRequest(goal string) plan.Request {
	return plan.Request{
		Goal:       goal,
		Transcript: []plan.Entry{{Role: plan.RoleUser, Text: goal}},
		Tools:      testTools,
		Config:     plan.Config{Kind: plan.KindOpenAI},
	}
}

func appError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want an ApplicationError, got %T: %v", err, err)
	return appErr
}

func proposal(name, args string) tool.Proposal {
	return tool.Proposal{Tool: name, Args: json.RawMessage(args)}
}

// ---------------------------------------------------------------------------
// Tests.

func TestSingleToolCall(t *testing.T) {
	f := newFakeServer(t, reply{file: "completion_single_call.json"})
	h := newHarness(newTestPlanner(t, f))

	dec, err := h.plan(t, goalRequest("Find the tickets about failed logins"))
	require.NoError(t, err)
	assert.Equal(t, []tool.Proposal{proposal("search_tickets", `{"query":"login fails after password reset","limit":5}`)}, dec.Calls)
	assert.Empty(t, dec.Answer)

	reqs := f.requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, http.MethodPost, reqs[0].method)
	assert.Equal(t, "/v1/chat/completions", reqs[0].path)
	assert.Equal(t, "Bearer "+testKey, reqs[0].auth)

	w := decodeRequest(t, reqs[0])
	assert.Equal(t, "gpt-4o-mini", w.Model)
	require.NotNil(t, w.ParallelToolCalls)
	assert.True(t, *w.ParallelToolCalls)

	require.Len(t, w.Messages, 2)
	assert.Equal(t, "system", w.Messages[0].Role)
	sys := w.Messages[0].text(t)
	assert.Contains(t, sys, "human's approval")
	assert.Contains(t, sys, "must not be proposed again with the same arguments")
	assert.Contains(t, sys, "answer the user in plain text")
	assert.Contains(t, sys, "Destructive tools in this run (each call needs a human's approval): close_ticket.")
	assert.Equal(t, "user", w.Messages[1].Role)
	assert.Equal(t, "Find the tickets about failed logins", w.Messages[1].text(t))

	require.Len(t, w.Tools, 3)
	for i, ti := range testTools {
		assert.Equal(t, "function", w.Tools[i].Type)
		assert.Equal(t, ti.Name, w.Tools[i].Function.Name)
		assert.Contains(t, w.Tools[i].Function.Description, ti.Description)
	}
	assert.JSONEq(t, string(testTools[0].Schema), string(w.Tools[0].Function.Parameters))
	assert.JSONEq(t, string(testTools[1].Schema), string(w.Tools[1].Function.Parameters))
	assert.Contains(t, w.Tools[1].Function.Description, "destructive")
	assert.NotContains(t, w.Tools[0].Function.Description, "destructive")
	// No schema: an object without properties.
	assert.JSONEq(t, `{"type":"object","properties":{}}`, string(w.Tools[2].Function.Parameters))

	logs := h.logger.all()
	assert.Contains(t, logs, "openai planner exchange")
	for _, want := range []string{"model=gpt-4o-mini", "messages=2", "tool_calls=1", "finish_reason=tool_calls"} {
		assert.Contains(t, logs, want)
	}
	assert.NotContains(t, logs, testKey)
}

func TestParallelToolCallsKeepTheModelsOrder(t *testing.T) {
	f := newFakeServer(t, reply{file: "completion_parallel_calls.json"})
	h := newHarness(newTestPlanner(t, f))

	dec, err := h.plan(t, goalRequest("Tidy up the billing tickets"))
	require.NoError(t, err)
	assert.Equal(t, []tool.Proposal{
		proposal("search_tickets", `{"query":"billing","limit":3}`),
		proposal("close_ticket", `{"ticket_id":"T-1042","note":"duplicate of T-1041"}`),
	}, dec.Calls)
	assert.Empty(t, dec.Answer)
}

func TestMalformedArgumentsArePassedOnNotFailed(t *testing.T) {
	f := newFakeServer(t, reply{file: "completion_malformed_args.json"})
	h := newHarness(newTestPlanner(t, f))

	dec, err := h.plan(t, goalRequest("Search billing"))
	require.NoError(t, err, "bad arguments must not fail the activity")
	require.Len(t, dec.Calls, 4)

	// Not JSON at all: the raw text as a JSON string, which the workflow's
	// schema check refuses ("arguments must be an object").
	assert.Equal(t, "search_tickets", dec.Calls[0].Tool)
	var raw string
	require.NoError(t, json.Unmarshal(dec.Calls[0].Args, &raw), "args %s", dec.Calls[0].Args)
	assert.Equal(t, `{"query": "billing", "limit": 3`, raw)

	// An unknown tool and arguments that break the schema: passed through as given.
	assert.Equal(t, proposal("delete_everything", `{"confirm":true}`), dec.Calls[1])
	assert.Equal(t, proposal("search_tickets", `{"limit":"five"}`), dec.Calls[2])
	// Empty arguments mean {}.
	assert.Equal(t, proposal("get_time", `{}`), dec.Calls[3])

	logs := h.logger.all()
	assert.Contains(t, logs, "arguments are not valid JSON")
	assert.Contains(t, logs, `unknown tool "delete_everything"`)
	assert.Contains(t, logs, "arguments do not match the schema: at /: missing property 'query'; at /limit: got string, want integer")
	assert.Contains(t, logs, "malformed_calls=3")
}

func TestRefusal(t *testing.T) {
	f := newFakeServer(t, reply{file: "completion_refusal.json"})
	h := newHarness(newTestPlanner(t, f))

	dec, err := h.plan(t, goalRequest("Do something you will refuse"))
	require.NoError(t, err)
	assert.Empty(t, dec.Calls)
	assert.Equal(t, "refused: I'm sorry, I can't help with that request.", dec.Answer)
}

func TestAnswer(t *testing.T) {
	f := newFakeServer(t, reply{file: "completion_answer.json"}, reply{file: "completion_empty.json"})
	h := newHarness(newTestPlanner(t, f))

	dec, err := h.plan(t, goalRequest("Summarise"))
	require.NoError(t, err)
	assert.Empty(t, dec.Calls)
	assert.True(t, strings.HasPrefix(dec.Answer, "I found ticket T-1041"), dec.Answer)

	// Neither text nor calls: the run goes on with a placeholder answer.
	dec, err = h.plan(t, goalRequest("Summarise"))
	require.NoError(t, err)
	assert.Equal(t, plan.Decision{Answer: NoAnswer}, dec)
	assert.Contains(t, h.logger.all(), "finish_reason=length")
}

func TestRateLimitedThenSuccess(t *testing.T) {
	f := newFakeServer(t,
		reply{status: http.StatusTooManyRequests, file: "error_429.json", header: map[string]string{"Retry-After": "7"}},
		reply{file: "completion_single_call.json"},
	)
	h := newHarness(newTestPlanner(t, f))
	req := goalRequest("Find the tickets about failed logins")

	// First attempt: a retryable error, after exactly one HTTP request (the
	// library's own retries are off; the activity's retry policy retries).
	_, err := h.plan(t, req)
	appErr := appError(t, err)
	assert.False(t, appErr.NonRetryable())
	assert.Equal(t, ErrUnavailable, appErr.Type())
	assert.Contains(t, appErr.Error(), "429")
	assert.Contains(t, appErr.Error(), "Rate limit reached for gpt-4o-mini")
	assert.Equal(t, 7*time.Second, appErr.NextRetryDelay(), "Retry-After becomes the next retry delay")
	assert.Equal(t, 1, len(f.requests()))

	// Second attempt: success.
	dec, err := h.plan(t, req)
	require.NoError(t, err)
	assert.Equal(t, []tool.Proposal{proposal("search_tickets", `{"query":"login fails after password reset","limit":5}`)}, dec.Calls)
	assert.Equal(t, 2, len(f.requests()))
}

func TestServerErrorIsRetryable(t *testing.T) {
	f := newFakeServer(t, reply{status: http.StatusInternalServerError, file: "error_500.json"})
	h := newHarness(newTestPlanner(t, f))

	_, err := h.plan(t, goalRequest("x"))
	appErr := appError(t, err)
	assert.False(t, appErr.NonRetryable())
	assert.Equal(t, ErrUnavailable, appErr.Type())
	assert.Contains(t, appErr.Error(), "500")
	assert.Contains(t, appErr.Error(), "The server had an error while processing your request")
	assert.Equal(t, 1, len(f.requests()), "the library must not retry by itself")
}

func TestUnauthorizedIsRejectedAndTheKeyIsRedacted(t *testing.T) {
	// The endpoint echoes the Authorization header in its message.
	f := newFakeServer(t, reply{status: http.StatusUnauthorized, file: "error_401.json"})
	h := newHarness(newTestPlanner(t, f))

	_, err := h.plan(t, goalRequest("x"))
	appErr := appError(t, err)
	assert.True(t, appErr.NonRetryable())
	assert.Equal(t, ErrRejected, appErr.Type())
	assert.Contains(t, appErr.Error(), "401")
	assert.Contains(t, appErr.Error(), "Incorrect API key provided")
	assert.Contains(t, appErr.Error(), "[redacted]")

	require.Len(t, f.requests(), 1)
	assert.Equal(t, "Bearer "+testKey, f.requests()[0].auth, "the key was sent")
	for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), h.logger.all()} {
		assert.NotContains(t, text, testKey)
		assert.NotContains(t, text, testKey[8:], "not even a part of the key")
	}
}

func TestAKeyOfAnyShapeIsRedacted(t *testing.T) {
	// A key that looks like no known key format, echoed bare.
	const key = "local-T0ken-9f8e7d6c5b4a"
	f := newFakeServer(t, reply{status: http.StatusForbidden,
		body: `{"error":{"message":"key {{key}} is not allowed here","type":"invalid_request_error","param":null,"code":null}}`})
	isolateEnv(t)
	h := newHarness(New(Options{BaseURL: f.URL(), APIKey: key, Model: "m"}))

	_, err := h.plan(t, goalRequest("x"))
	appErr := appError(t, err)
	assert.Equal(t, ErrRejected, appErr.Type())
	assert.Contains(t, appErr.Error(), "key [redacted] is not allowed here")
	assert.NotContains(t, fmt.Sprintf("%+v", err), key)
	assert.NotContains(t, h.logger.all(), key)
}

func TestOtherClientErrorsAreRejected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		rep    reply
		want   string
	}{
		{"400", http.StatusBadRequest, reply{body: `{"error":{"message":"Invalid 'messages[2].tool_call_id': empty string.","type":"invalid_request_error","param":"messages[2].tool_call_id","code":"empty_string"}}`}, "Invalid 'messages[2].tool_call_id'"},
		{"403", http.StatusForbidden, reply{body: `{"error":{"message":"Project does not have access to model gpt-4o","type":"invalid_request_error","param":null,"code":"model_not_found"}}`}, "does not have access"},
		{"404", http.StatusNotFound, reply{file: "error_404_model.json"}, "does not exist"},
		// Not OpenAI's error shape (a proxy), still echoing the header.
		{"403 text", http.StatusForbidden, reply{body: "forbidden for {{authorization}}", ctype: "text/plain"}, "forbidden for Bearer [redacted]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.rep.status = tc.status
			f := newFakeServer(t, tc.rep)
			h := newHarness(newTestPlanner(t, f))

			_, err := h.plan(t, goalRequest("x"))
			appErr := appError(t, err)
			assert.True(t, appErr.NonRetryable())
			assert.Equal(t, ErrRejected, appErr.Type())
			assert.Contains(t, appErr.Error(), fmt.Sprint(tc.status))
			assert.Contains(t, appErr.Error(), tc.want)
			assert.NotContains(t, appErr.Error(), testKey)
			assert.Equal(t, 1, len(f.requests()))
		})
	}
}

func TestNetworkErrorsAndTimeoutsAreRetryable(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		f := newFakeServer(t)
		p := newTestPlanner(t, f)
		f.srv.Close()
		h := newHarness(p)

		_, err := h.plan(t, goalRequest("x"))
		appErr := appError(t, err)
		assert.False(t, appErr.NonRetryable())
		assert.Equal(t, ErrUnavailable, appErr.Type())
		assert.NotContains(t, appErr.Error(), testKey)
	})
	t.Run("timeout", func(t *testing.T) {
		f := newFakeServer(t, reply{file: "completion_answer.json", delay: 2 * time.Second})
		isolateEnv(t)
		p := New(Options{BaseURL: f.URL(), APIKey: testKey, Model: "gpt-4o-mini", Timeout: 100 * time.Millisecond})
		h := newHarness(p)

		start := time.Now()
		_, err := h.plan(t, goalRequest("x"))
		appErr := appError(t, err)
		assert.False(t, appErr.NonRetryable())
		assert.Equal(t, ErrUnavailable, appErr.Type())
		assert.Less(t, time.Since(start), 2*time.Second)
		assert.Equal(t, 1, len(f.requests()))
	})
}

func TestTranscriptRendersOutcomesAsToolMessages(t *testing.T) {
	f := newFakeServer(t, reply{file: "completion_answer.json"})
	h := newHarness(newTestPlanner(t, f))

	goal := "Close the duplicate login tickets"
	req := plan.Request{
		Goal:  goal,
		Tools: testTools,
		Step:  4,
		Transcript: []plan.Entry{
			{Role: plan.RoleUser, Text: goal},
			{Role: plan.RoleAssistant, Calls: []tool.Call{
				{ID: "c-1", Tool: "search_tickets", Args: json.RawMessage(`{"query":"login"}`)},
				{ID: "c-2", Tool: "get_time", Args: json.RawMessage(`{}`)},
			}},
			// Outcomes in completion order, not proposal order.
			{Role: plan.RoleTool, CallID: "c-2", Tool: "get_time", Status: "ok", Result: json.RawMessage(`{"now":"2025-07-08T10:00:00Z"}`)},
			{Role: plan.RoleTool, CallID: "c-1", Tool: "search_tickets", Status: "cache_hit", Result: json.RawMessage(`[{"id":"T-1041"},{"id":"T-1042"}]`)},
			{Role: plan.RoleAssistant, Calls: []tool.Call{
				{ID: "c-3", Tool: "close_ticket", Args: json.RawMessage(`{"ticket_id":"T-1041"}`)},
				{ID: "c-4", Tool: "close_ticket", Args: json.RawMessage(`{"ticket_id":"T-1042"}`)},
			}},
			{Role: plan.RoleTool, CallID: "c-3", Tool: "close_ticket", Status: "rejected", Error: "not executed: rejected by bob: wrong ticket, keep T-1041 open"},
			{Role: plan.RoleTool, CallID: "c-4", Tool: "close_ticket", Status: "expired", Error: "no decision within 24h0m0s: treated as rejected"},
			{Role: plan.RoleAssistant, Text: "Nothing was closed: the reviewer rejected T-1041 and T-1042 got no decision."},
			{Role: plan.RoleUser, Text: "also check billing"},
			{Role: plan.RoleAssistant, Calls: []tool.Call{
				{ID: "c-5", Tool: "search_tickets", Args: json.RawMessage(`{"query":"billing"}`)},
				// Arguments the model got wrong travel as a JSON string.
				{ID: "c-6", Tool: "search_tickets", Args: json.RawMessage(`"{query: billing"`)},
			}},
			{Role: plan.RoleTool, CallID: "c-5", Tool: "search_tickets", Status: "error", Error: "ticket database unavailable"},
			{Role: plan.RoleTool, CallID: "c-6", Tool: "search_tickets", Status: "error", Error: "invalid arguments: arguments must be an object"},
		},
		Config: plan.Config{Kind: plan.KindOpenAI},
	}
	_, err := h.plan(t, req)
	require.NoError(t, err)
	reqs := f.requests()
	require.Len(t, reqs, 1)
	w := decodeRequest(t, reqs[0])
	assertValidSequence(t, w.Messages)

	var roles []string
	for _, m := range w.Messages {
		roles = append(roles, m.Role)
	}
	assert.Equal(t, []string{"system", "user", "assistant", "tool", "tool", "assistant", "tool", "tool", "assistant", "user", "assistant", "tool", "tool"}, roles)

	m := w.Messages
	assert.Equal(t, goal, m[1].text(t), "the goal is not repeated")

	require.Len(t, m[2].ToolCalls, 2)
	assert.Equal(t, "c-1", m[2].ToolCalls[0].ID)
	assert.Equal(t, "function", m[2].ToolCalls[0].Type)
	assert.Equal(t, "search_tickets", m[2].ToolCalls[0].Function.Name)
	assert.JSONEq(t, `{"query":"login"}`, m[2].ToolCalls[0].Function.Arguments)
	assert.Equal(t, "c-2", m[2].ToolCalls[1].ID)

	assert.Equal(t, "c-2", m[3].ToolCallID)
	assert.Equal(t, "the call succeeded; result:\n{\"now\":\"2025-07-08T10:00:00Z\"}", m[3].text(t))
	assert.Equal(t, "c-1", m[4].ToolCallID)
	assert.Contains(t, m[4].text(t), "memo")
	assert.Contains(t, m[4].text(t), `[{"id":"T-1041"},{"id":"T-1042"}]`)

	assert.Equal(t, "c-3", m[6].ToolCallID)
	assert.Equal(t, "not executed: rejected by bob: wrong ticket, keep T-1041 open", m[6].text(t), "said as the run says it")
	assert.Equal(t, "c-4", m[7].ToolCallID)
	assert.Equal(t, "not executed: no decision within 24h0m0s: treated as rejected", m[7].text(t), "a run before rules version 6 says it without \"not executed\"")

	assert.Equal(t, "Nothing was closed: the reviewer rejected T-1041 and T-1042 got no decision.", m[8].text(t))
	assert.Empty(t, m[8].ToolCalls)
	assert.Equal(t, "also check billing", m[9].text(t))

	require.Len(t, m[10].ToolCalls, 2)
	assert.Equal(t, "{query: billing", m[10].ToolCalls[1].Function.Arguments, "the model sees the text it wrote")
	assert.Equal(t, "c-5", m[11].ToolCallID)
	assert.Equal(t, "the call failed: ticket database unavailable", m[11].text(t))
	assert.Equal(t, "c-6", m[12].ToolCallID)
	assert.Equal(t, "the call failed: invalid arguments: arguments must be an object", m[12].text(t))
}

func TestTranscriptEdgesStayValid(t *testing.T) {
	f := newFakeServer(t, reply{file: "completion_answer.json"})
	h := newHarness(newTestPlanner(t, f))

	req := plan.Request{
		Goal:  "Close the duplicate login tickets",
		Tools: testTools,
		// Trimmed to its most recent entries: starts with an outcome whose
		// call is no longer in view, and ends with a call without outcome.
		Transcript: []plan.Entry{
			{Role: plan.RoleTool, CallID: "c-1", Tool: "search_tickets", Status: "ok", Result: json.RawMessage(`[]`)},
			{Role: plan.RoleAssistant, Calls: []tool.Call{
				{ID: "c-2", Tool: "close_ticket", Args: json.RawMessage(`{"ticket_id":"T-1"}`)},
				{ID: "c-3", Tool: "get_time"},
			}},
			{Role: plan.RoleTool, CallID: "c-3", Tool: "get_time", Status: "blocked"},
			{Role: plan.RoleTool, CallID: "c-3", Tool: "get_time", Status: "ok", Result: json.RawMessage(`1`)}, // a duplicate
		},
	}
	_, err := h.plan(t, req)
	require.NoError(t, err)
	w := decodeRequest(t, f.requests()[0])
	assertValidSequence(t, w.Messages)

	var roles []string
	for _, m := range w.Messages {
		roles = append(roles, m.Role)
	}
	assert.Equal(t, []string{"system", "user", "assistant", "tool", "tool"}, roles)
	assert.Equal(t, req.Goal, w.Messages[1].text(t), "the goal opens the conversation")
	assert.Equal(t, "{}", w.Messages[2].ToolCalls[1].Function.Arguments)
	assert.Equal(t, "c-3", w.Messages[3].ToolCallID)
	assert.Contains(t, w.Messages[3].text(t), "blocked")
	assert.Equal(t, "c-2", w.Messages[4].ToolCallID)
	assert.Contains(t, w.Messages[4].text(t), "no outcome was recorded")
}

// assertValidSequence checks the Chat Completions pairing rules: every tool
// message answers a call of the assistant message before it, and every call
// is answered before the next non-tool message.
func assertValidSequence(t *testing.T, msgs []wireMessage) {
	t.Helper()
	open := map[string]bool{}
	for i, m := range msgs {
		if m.Role == "tool" {
			assert.True(t, open[m.ToolCallID], "message %d answers %q, which is not an open call", i, m.ToolCallID)
			delete(open, m.ToolCallID)
			continue
		}
		assert.Empty(t, open, "message %d (%s) comes before calls %v are answered", i, m.Role, open)
		open = map[string]bool{}
		for _, c := range m.ToolCalls {
			assert.NotEmpty(t, c.ID)
			assert.False(t, open[c.ID], "duplicate tool_call id %q", c.ID)
			open[c.ID] = true
		}
	}
	assert.Empty(t, open, "calls left unanswered at the end")
}

func TestBaseURLFromTheRun(t *testing.T) {
	t.Run("another endpoint gets no key", func(t *testing.T) {
		worker := newFakeServer(t)
		run := newFakeServer(t, reply{file: "completion_answer.json"})
		h := newHarness(newTestPlanner(t, worker))

		req := goalRequest("x")
		req.Config.BaseURL = run.URL()
		req.Config.Model = "llama3.1:8b"
		dec, err := h.plan(t, req)
		require.NoError(t, err)
		assert.NotEmpty(t, dec.Answer)

		assert.Equal(t, 0, len(worker.requests()))
		reqs := run.requests()
		require.Len(t, reqs, 1)
		assert.Equal(t, "/v1/chat/completions", reqs[0].path)
		assert.Empty(t, reqs[0].auth, "the worker's key is not sent to an endpoint the run chose")
		assert.Equal(t, "llama3.1:8b", decodeRequest(t, reqs[0]).Model, "the run's model wins")
	})
	t.Run("the worker's endpoint keeps the key", func(t *testing.T) {
		f := newFakeServer(t, reply{file: "completion_answer.json"})
		isolateEnv(t)
		p := New(Options{BaseURL: f.srv.URL + "/other", APIKey: testKey, Model: "gpt-4o-mini"})
		h := newHarness(p)

		req := goalRequest("x")
		req.Config.BaseURL = f.URL() // same origin, another path
		_, err := h.plan(t, req)
		require.NoError(t, err)
		reqs := f.requests()
		require.Len(t, reqs, 1)
		assert.Equal(t, "/v1/chat/completions", reqs[0].path)
		assert.Equal(t, "Bearer "+testKey, reqs[0].auth)
	})
	t.Run("a 401 there says why", func(t *testing.T) {
		worker := newFakeServer(t)
		run := newFakeServer(t, reply{status: http.StatusUnauthorized, file: "error_401.json"})
		h := newHarness(newTestPlanner(t, worker))

		req := goalRequest("x")
		req.Config.BaseURL = run.URL()
		_, err := h.plan(t, req)
		appErr := appError(t, err)
		assert.Equal(t, ErrRejected, appErr.Type())
		assert.Contains(t, appErr.Error(), "no API key was sent")
	})
}

func TestMisconfigured(t *testing.T) {
	t.Run("no model anywhere", func(t *testing.T) {
		f := newFakeServer(t)
		isolateEnv(t)
		h := newHarness(New(Options{BaseURL: f.URL(), APIKey: testKey}))

		_, err := h.plan(t, goalRequest("x"))
		appErr := appError(t, err)
		assert.True(t, appErr.NonRetryable())
		assert.Equal(t, ErrMisconfigured, appErr.Type())
		assert.Contains(t, appErr.Error(), "model")
		assert.Equal(t, 0, len(f.requests()))
	})
	for _, bad := range []string{"ftp://example.com/v1", "localhost:11434", "http://%zz"} {
		t.Run("run base_url "+bad, func(t *testing.T) {
			f := newFakeServer(t)
			h := newHarness(newTestPlanner(t, f))
			req := goalRequest("x")
			req.Config.BaseURL = bad
			_, err := h.plan(t, req)
			appErr := appError(t, err)
			assert.True(t, appErr.NonRetryable())
			assert.Equal(t, ErrMisconfigured, appErr.Type())
			assert.Equal(t, 0, len(f.requests()))
		})
	}
	t.Run("no key for the hosted endpoint", func(t *testing.T) {
		isolateEnv(t)
		asked := 0
		hc := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			asked++
			return nil, errors.New("no network")
		})}
		h := newHarness(New(Options{Model: "m", HTTPClient: hc}))
		_, err := h.plan(t, goalRequest("x"))
		appErr := appError(t, err)
		assert.True(t, appErr.NonRetryable(), "retrying cannot give the worker a key")
		assert.Equal(t, ErrMisconfigured, appErr.Type())
		assert.Contains(t, appErr.Error(), "no API key for")
		assert.Contains(t, appErr.Error(), "set OPENAI_API_KEY")
		assert.Zero(t, asked, "nothing is sent")
	})
	t.Run("worker base URL", func(t *testing.T) {
		isolateEnv(t)
		h := newHarness(New(Options{BaseURL: "not a url", APIKey: testKey, Model: "m"}))
		_, err := h.plan(t, goalRequest("x"))
		appErr := appError(t, err)
		assert.True(t, appErr.NonRetryable())
		assert.Equal(t, ErrMisconfigured, appErr.Type())
	})
}

func TestOptionsFromTheEnvironment(t *testing.T) {
	f := newFakeServer(t, reply{file: "completion_answer.json"})
	isolateEnv(t)
	t.Setenv("OPENAI_BASE_URL", f.URL())
	t.Setenv("OPENAI_API_KEY", testKey)
	t.Setenv("OPENAI_MODEL", "gpt-4o-mini")

	opts := OptionsFromEnv()
	assert.Equal(t, Options{BaseURL: f.URL(), APIKey: testKey, Model: "gpt-4o-mini", Timeout: DefaultTimeout}, opts)

	// Fields left empty default to the environment.
	h := newHarness(New(Options{}))
	_, err := h.plan(t, goalRequest("x"))
	require.NoError(t, err)
	reqs := f.requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "Bearer "+testKey, reqs[0].auth)
	assert.Equal(t, "gpt-4o-mini", decodeRequest(t, reqs[0]).Model)
}

func TestNoKeyNoAuthorizationHeader(t *testing.T) {
	f := newFakeServer(t, reply{file: "completion_answer.json"})
	isolateEnv(t)
	h := newHarness(New(Options{BaseURL: f.URL(), Model: "llama3.1:8b"}))
	_, err := h.plan(t, goalRequest("x"))
	require.NoError(t, err)
	require.Len(t, f.requests(), 1)
	assert.Empty(t, f.requests()[0].auth)
}

func TestCustomHTTPClient(t *testing.T) {
	f := newFakeServer(t, reply{file: "completion_answer.json"})
	isolateEnv(t)
	var mu sync.Mutex
	seen := 0
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		seen++
		mu.Unlock()
		return http.DefaultTransport.RoundTrip(r)
	})}
	h := newHarness(New(Options{BaseURL: f.URL(), APIKey: testKey, Model: "m", HTTPClient: client}))
	_, err := h.plan(t, goalRequest("x"))
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, seen)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestPlanOutsideAnActivity(t *testing.T) {
	f := newFakeServer(t, reply{file: "completion_parallel_calls.json"})
	p := newTestPlanner(t, f)
	dec, err := p.Plan(context.Background(), goalRequest("x"))
	require.NoError(t, err)
	assert.Len(t, dec.Calls, 2)
}

func TestConcurrentPlans(t *testing.T) {
	var replies []reply
	for range 8 {
		replies = append(replies, reply{file: "completion_single_call.json"})
	}
	f := newFakeServer(t, replies...)
	p := newTestPlanner(t, f)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			dec, err := p.Plan(context.Background(), goalRequest("x"))
			assert.NoError(t, err)
			assert.Len(t, dec.Calls, 1)
		})
	}
	wg.Wait()
	assert.Equal(t, 8, len(f.requests()))
}

// The model is told what a human decided as the run says it: a response in
// the tool's place (whose, and the answer), a cancellation.
func TestOutcomeWordsOfHumanDecisions(t *testing.T) {
	responded := outcomeText(plan.Entry{Status: plan.StatusResponded, Result: json.RawMessage(`{"rows":[]}`), Note: "not executed: alice answered in the tool's place"})
	assert.Equal(t, "not executed: alice answered in the tool's place\nthe tool did not run; the human's answer in its place:\n{\"rows\":[]}", responded)
	cancelled := outcomeText(plan.Entry{Status: plan.StatusCancelled, Error: "not executed: cancelled by bob: the user left"})
	assert.Equal(t, "not executed: cancelled by bob: the user left", cancelled)
}
