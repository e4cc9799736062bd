// Package model drives toolgate's OpenAI planner end to end against a fake
// model: a local HTTP server that speaks the Chat Completions protocol and
// answers like a model following a script (fake.go), a real embedded Temporal
// server with toolgate's worker (env.go), and the seed's support-desk
// walk-through driven by the model (walkthrough.go).
//
// Nothing here ever talks to a real model: every planner built by this
// package points at a Fake.
//
// The recorded history of the walk-through, testdata/model_walkthrough.json,
// is regenerated with
//
//	go run ./testsuite/model/record
package model

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"time"
)

// ---------------------------------------------------------------------------
// What the fake reads from a request.

// ChatRequest is the part of a Chat Completions request the fake reads.
type ChatRequest struct {
	Model             string        `json:"model"`
	Messages          []ChatMessage `json:"messages"`
	Tools             []ChatTool    `json:"tools"`
	ParallelToolCalls *bool         `json:"parallel_tool_calls"`
}

// ChatMessage is one message of a request.
type ChatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []ToolCall      `json:"tool_calls"`
}

// ToolCall is a call an assistant message proposed.
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// ChatTool is a tool offered to the model.
type ChatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// Text is the message's content: a string, or the text parts of an array.
func (m ChatMessage) Text() string {
	raw := bytes.TrimSpace(m.Content)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return string(raw)
}

// ToolMessages are the request's tool messages (call outcomes), in order.
func (r ChatRequest) ToolMessages() []ChatMessage {
	var out []ChatMessage
	for _, m := range r.Messages {
		if m.Role == "tool" {
			out = append(out, m)
		}
	}
	return out
}

// CallOf is the assistant's tool call that a tool message answers.
func (r ChatRequest) CallOf(toolMsg ChatMessage) (ToolCall, bool) {
	for _, m := range r.Messages {
		for _, c := range m.ToolCalls {
			if c.ID == toolMsg.ToolCallID {
				return c, true
			}
		}
	}
	return ToolCall{}, false
}

// Tool is the offered tool of that name.
func (r ChatRequest) Tool(name string) (ChatTool, bool) {
	for _, t := range r.Tools {
		if t.Function.Name == name {
			return t, true
		}
	}
	return ChatTool{}, false
}

// ---------------------------------------------------------------------------
// What the fake answers.

// Reply is what the scripted model answers: tool calls, or (when Calls is
// empty) the text of its answer.
type Reply struct {
	Calls []Call
	Text  string
}

// Call is one tool call as the model writes it. Arguments is the raw text the
// model produced, which need not be valid JSON.
type Call struct {
	Name      string
	Arguments string
}

// Script is the model: it decides its reply from what it is shown, never from
// how many requests came before, so a retried request gets the same answer.
// An error means the request is not what the script expects; the fake then
// answers 400 with the error's text (a PlannerRejected failure, which ends
// the run with a clear error) and records it as a problem.
type Script func(ChatRequest) (Reply, error)

// Received is one request the fake got.
type Received struct {
	Method        string
	Path          string
	Authorization string
	Body          []byte
	Request       ChatRequest // decoded Body
	Status        int         // the status the fake answered
}

// Fake is a Chat Completions endpoint played by a Script.
type Fake struct {
	// Key, when set, is the only API key accepted: any other Authorization
	// is answered 401 like OpenAI does.
	Key string

	srv    *httptest.Server
	script Script

	mu       sync.Mutex
	reqs     []Received
	problems []string
}

// NewFake starts a fake endpoint playing script. Close it when done.
func NewFake(script Script) *Fake {
	f := &Fake{script: script}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// URL is the base URL to give a planner (the server's address plus "/v1").
func (f *Fake) URL() string { return f.srv.URL + "/v1" }

// Close stops the server.
func (f *Fake) Close() { f.srv.Close() }

// Requests returns every request received so far.
func (f *Fake) Requests() []Received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Received(nil), f.reqs...)
}

// Problems lists what the script (or the fake) found wrong with requests.
func (f *Fake) Problems() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.problems...)
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec := Received{Method: r.Method, Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), Body: body}
	status, out := f.answer(&rec)
	rec.Status = status

	f.mu.Lock()
	f.reqs = append(f.reqs, rec)
	f.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", "req_"+digest(body, "request", 32))
	w.Header().Set("Openai-Processing-Ms", "412")
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

func (f *Fake) problem(format string, a ...any) string {
	msg := fmt.Sprintf(format, a...)
	f.mu.Lock()
	f.problems = append(f.problems, msg)
	f.mu.Unlock()
	return msg
}

// answer decides the status and body for one request.
func (f *Fake) answer(rec *Received) (int, []byte) {
	if rec.Method != http.MethodPost || rec.Path != "/v1/chat/completions" {
		msg := f.problem("unexpected request %s %s", rec.Method, rec.Path)
		return http.StatusNotFound, errorBody(msg, "invalid_request_error", "")
	}
	if f.Key != "" && rec.Authorization != "Bearer "+f.Key {
		f.problem("request without the expected API key")
		return http.StatusUnauthorized, errorBody(
			"Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
			"invalid_request_error", "invalid_api_key")
	}
	if err := json.Unmarshal(rec.Body, &rec.Request); err != nil {
		msg := f.problem("request body is not a chat completion request: %v", err)
		return http.StatusBadRequest, errorBody(msg, "invalid_request_error", "")
	}
	if rec.Request.Model == "" {
		msg := f.problem("request names no model")
		return http.StatusBadRequest, errorBody(msg, "invalid_request_error", "")
	}
	reply, err := f.script(rec.Request)
	if err != nil {
		msg := f.problem("script: %v", err)
		return http.StatusBadRequest, errorBody("fake model: "+msg, "invalid_request_error", "")
	}
	return http.StatusOK, completion(rec.Request.Model, rec.Body, reply)
}

// ---------------------------------------------------------------------------
// Responses, shaped exactly like OpenAI's.

type wireCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []wireChoice `json:"choices"`
	Usage             wireUsage    `json:"usage"`
	ServiceTier       string       `json:"service_tier"`
	SystemFingerprint string       `json:"system_fingerprint"`
}

type wireChoice struct {
	Index        int         `json:"index"`
	Message      wireMessage `json:"message"`
	Logprobs     *struct{}   `json:"logprobs"`
	FinishReason string      `json:"finish_reason"`
}

type wireMessage struct {
	Role        string         `json:"role"`
	Content     *string        `json:"content"`
	ToolCalls   []wireToolCall `json:"tool_calls,omitempty"`
	Refusal     *string        `json:"refusal"`
	Annotations []struct{}     `json:"annotations"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
		AudioTokens  int `json:"audio_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens          int `json:"reasoning_tokens"`
		AudioTokens              int `json:"audio_tokens"`
		AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
		RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
	} `json:"completion_tokens_details"`
}

// completion renders reply as a chat.completion object. Ids are derived from
// the request, so the same request always gets the same answer.
func completion(model string, body []byte, reply Reply) []byte {
	msg := wireMessage{Role: "assistant", Annotations: []struct{}{}}
	finish := "stop"
	completionText := reply.Text
	if len(reply.Calls) > 0 {
		finish = "tool_calls"
		for i, c := range reply.Calls {
			msg.ToolCalls = append(msg.ToolCalls, wireToolCall{
				ID:       "call_" + digest(body, fmt.Sprintf("call-%d", i), 24),
				Type:     "function",
				Function: wireFunction(c),
			})
			completionText += c.Name + c.Arguments
		}
	} else {
		text := reply.Text
		msg.Content = &text
	}
	c := wireCompletion{
		ID:                "chatcmpl-" + digest(body, "completion", 29),
		Object:            "chat.completion",
		Created:           time.Now().Unix(),
		Model:             model,
		Choices:           []wireChoice{{Index: 0, Message: msg, FinishReason: finish}},
		ServiceTier:       "default",
		SystemFingerprint: "fp_" + digest([]byte(model), "fingerprint", 10),
	}
	// Roughly four bytes a token, like English text.
	c.Usage.PromptTokens = len(body)/4 + 1
	c.Usage.CompletionTokens = len(completionText)/4 + 1
	c.Usage.TotalTokens = c.Usage.PromptTokens + c.Usage.CompletionTokens
	out, _ := json.MarshalIndent(c, "", "  ") // plain structs always marshal
	return out
}

// errorBody is OpenAI's error object.
func errorBody(message, typ, code string) []byte {
	var codeVal any
	if code != "" {
		codeVal = code
	}
	out, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message, "type": typ, "param": nil, "code": codeVal,
	}})
	return out
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// digest is an n-character alphanumeric id derived from data and salt.
func digest(data []byte, salt string, n int) string {
	out := make([]byte, 0, n)
	for block := 0; len(out) < n; block++ {
		sum := sha256.Sum256(append([]byte(fmt.Sprintf("%s/%d/", salt, block)), data...))
		for _, b := range sum {
			if len(out) == n {
				break
			}
			out = append(out, alnum[int(b)%len(alnum)])
		}
	}
	return string(out)
}

// ---------------------------------------------------------------------------
// The seed walk-through, as a model would play it.

// Texts the planner puts in tool messages (activities/openai, outcomeText).
const (
	succeededPrefix = "the call succeeded"
	fromMemo        = "the result came from the memo"
	rejectedPrefix  = "not executed: "
)

// rejectedBy is how the run words a rejection ("rejected by alice: <reason>").
var rejectedBy = regexp.MustCompile(`^rejected by [^:]*: `)

// SeedScript is the model of the seed walk-through. What it answers depends
// only on how many call outcomes it has been shown:
//
//  0. search_tickets {"query":"login"}
//  1. (it sees the result, which lists TKT-3) the same search again;
//  2. (it sees the second result, marked as coming from the memo)
//     close_ticket {"ticket_id":"TKT-3"};
//  3. (it sees that a human rejected the close, and why) the answer
//     "I did not close TKT-3: <the reviewer's reason>".
//
// At each step it checks that it was shown what it expects, and fails the
// request (400) otherwise.
func SeedScript() Script {
	return func(req ChatRequest) (Reply, error) {
		outcomes := req.ToolMessages()
		expect := func(i int, tool string) (string, error) {
			m := outcomes[i]
			call, ok := req.CallOf(m)
			if !ok {
				return "", fmt.Errorf("tool message %d (tool_call_id %q) answers no call", i+1, m.ToolCallID)
			}
			if call.Function.Name != tool {
				return "", fmt.Errorf("tool message %d answers a %s call, want %s", i+1, call.Function.Name, tool)
			}
			return m.Text(), nil
		}
		search := Call{Name: "search_tickets", Arguments: `{"query":"login"}`}
		switch len(outcomes) {
		case 0:
			if _, ok := req.Tool("close_ticket"); !ok {
				return Reply{}, fmt.Errorf("close_ticket is not among the tools offered")
			}
			return Reply{Calls: []Call{search}}, nil
		case 1:
			text, err := expect(0, "search_tickets")
			if err != nil {
				return Reply{}, err
			}
			if !strings.HasPrefix(text, succeededPrefix) || !strings.Contains(text, `"TKT-3"`) {
				return Reply{}, fmt.Errorf("the first search did not succeed with TKT-3: %q", text)
			}
			return Reply{Calls: []Call{search}}, nil
		case 2:
			text, err := expect(1, "search_tickets")
			if err != nil {
				return Reply{}, err
			}
			if !strings.Contains(text, fromMemo) || !strings.Contains(text, `"TKT-3"`) {
				return Reply{}, fmt.Errorf("the second search is not a memo hit with TKT-3: %q", text)
			}
			return Reply{Calls: []Call{{Name: "close_ticket", Arguments: `{"ticket_id":"TKT-3"}`}}}, nil
		case 3:
			text, err := expect(2, "close_ticket")
			if err != nil {
				return Reply{}, err
			}
			reason, ok := strings.CutPrefix(text, rejectedPrefix)
			if !ok {
				return Reply{}, fmt.Errorf("the close was not rejected: %q", text)
			}
			reason, _, _ = strings.Cut(reason, "\n")
			reason = rejectedBy.ReplaceAllString(reason, "")
			return Reply{Text: "I did not close TKT-3: " + reason}, nil
		default:
			return Reply{}, fmt.Errorf("shown %d call outcomes; the walk-through has 3", len(outcomes))
		}
	}
}
