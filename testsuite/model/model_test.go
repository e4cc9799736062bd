package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/toolgate/toolgate/activities/desk"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/replay"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// ---------------------------------------------------------------------------
// Helpers.

// newFake starts a fake model that accepts only APIKey.
func newFake(t *testing.T, script Script) *Fake {
	t.Helper()
	f := NewFake(script)
	f.Key = APIKey
	t.Cleanup(f.Close)
	return f
}

// startEnv starts a server, desk and worker under t.TempDir(), the worker's
// OpenAI planner pointed at f.
func startEnv(t *testing.T, f *Fake) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := StartEnv(ctx, t.TempDir(), PlannerOptions(f))
	require.NoError(t, err)
	t.Cleanup(e.Close)
	return e
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func openAIInput(goal string) workflows.RunInput {
	return workflows.RunInput{Goal: goal, Planner: plan.Config{Kind: plan.KindOpenAI, Model: ModelName}}
}

// statuses renders a trace as "c-1:search_tickets:ok" lines.
func statuses(trace []workflows.TraceRecord) []string {
	out := make([]string, 0, len(trace))
	for _, r := range trace {
		out = append(out, r.CallID+":"+r.Tool+":"+r.Status)
	}
	return out
}

// toolTexts maps the tool messages of a request by tool_call_id.
func toolTexts(req ChatRequest) map[string]string {
	out := map[string]string{}
	for _, m := range req.ToolMessages() {
		out[m.ToolCallID] = m.Text()
	}
	return out
}

// scheduledActivities lists the activity types a history scheduled, in order.
func scheduledActivities(h *historypb.History) []string {
	var out []string
	for _, ev := range h.Events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			out = append(out, a.GetActivityType().GetName())
		}
	}
	return out
}

// plannerDecisions decodes the results of the history's completed
// plan.openai activities, in order.
func plannerDecisions(t *testing.T, h *historypb.History) []plan.Decision {
	t.Helper()
	planners := map[int64]bool{}
	var out []plan.Decision
	for _, ev := range h.Events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == plan.ActivityName(plan.KindOpenAI) {
			planners[ev.GetEventId()] = true
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && planners[a.GetScheduledEventId()] {
			var d plan.Decision
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(a.GetResult(), &d))
			out = append(out, d)
		}
	}
	return out
}

func workflowResult(t *testing.T, h *historypb.History) workflows.RunResult {
	t.Helper()
	last := h.Events[len(h.Events)-1]
	require.Equal(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, last.GetEventType())
	var res workflows.RunResult
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(
		last.GetWorkflowExecutionCompletedEventAttributes().GetResult(), &res))
	return res
}

// ---------------------------------------------------------------------------
// The fake itself.

func TestFakeAnswersLikeOpenAIAndByContent(t *testing.T) {
	f := newFake(t, SeedScript())
	body := `{"model":"gpt-test","messages":[{"role":"system","content":"s"},{"role":"user","content":"find the login ticket"}],` +
		`"tools":[{"type":"function","function":{"name":"search_tickets","parameters":{"type":"object"}}},` +
		`{"type":"function","function":{"name":"close_ticket","parameters":{"type":"object"}}}]}`
	post := func(key string) (int, map[string]any) {
		req, err := http.NewRequest(http.MethodPost, f.URL()+"/chat/completions", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return resp.StatusCode, out
	}

	status, first := post(APIKey)
	require.Equal(t, http.StatusOK, status, "%v", first)
	assert.Regexp(t, `^chatcmpl-[A-Za-z0-9]{29}$`, first["id"])
	assert.Equal(t, "chat.completion", first["object"])
	assert.IsType(t, float64(0), first["created"])
	assert.Equal(t, "gpt-test", first["model"])
	require.Contains(t, first, "usage")
	usage := first["usage"].(map[string]any)
	assert.Equal(t, usage["prompt_tokens"].(float64)+usage["completion_tokens"].(float64), usage["total_tokens"])
	choice := first["choices"].([]any)[0].(map[string]any)
	assert.Equal(t, "tool_calls", choice["finish_reason"])
	msg := choice["message"].(map[string]any)
	assert.Equal(t, "assistant", msg["role"])
	assert.Nil(t, msg["content"])
	call := msg["tool_calls"].([]any)[0].(map[string]any)
	assert.Regexp(t, `^call_[A-Za-z0-9]{24}$`, call["id"])
	assert.Equal(t, "function", call["type"])
	assert.Equal(t, map[string]any{"name": "search_tickets", "arguments": `{"query":"login"}`}, call["function"])

	// The same request again (a retry) gets the same answer.
	status, again := post(APIKey)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, first["id"], again["id"])
	assert.Equal(t, first["choices"], again["choices"])

	// Another key is refused, as OpenAI refuses it.
	status, refused := post("sk-test-wrong")
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Equal(t, "invalid_api_key", refused["error"].(map[string]any)["code"])
	assert.Len(t, f.Requests(), 3)
}

// ---------------------------------------------------------------------------
// The seed walk-through, driven by the model.

func TestModelDrivenSeedWalkThrough(t *testing.T) {
	fake := newFake(t, SeedScript())
	env := startEnv(t, fake)
	ctx := testContext(t)

	w, err := RunWalkThrough(ctx, env, "model-walkthrough-test", func(s workflows.State) error {
		// While the close waits, the model has been asked three times and is
		// not asked again until a human decides.
		if n := len(fake.Requests()); n != 3 {
			return fmt.Errorf("the model was asked %d times before the decision, want 3", n)
		}
		return nil
	})
	require.NoError(t, err, "fake problems: %q", fake.Problems())

	// The pause: the model's close of TKT-3, held at the gate.
	assert.Equal(t, workflows.StatusWaitingForApproval, w.Paused.Status)
	assert.Equal(t, []string{"gate:close_ticket"}, w.Paused.Next)
	require.Len(t, w.Paused.Interrupts, 1)
	assert.Equal(t, "c-3", w.Paused.Interrupts[0].CallID)
	assert.JSONEq(t, `{"ticket_id":"TKT-3"}`, string(w.Paused.Interrupts[0].CallArgs))
	assert.Equal(t, int64(1), w.Paused.Memo.Hits)
	assert.Equal(t, workflows.DecisionResult{CallID: "c-3", Tool: "close_ticket", Decision: workflows.TraceRejected, Approver: Reviewer}, w.Decision)

	// The run ends with the model's answer, which quotes the reviewer.
	res := w.Result
	require.Equal(t, workflows.StatusCompleted, res.Status, "error: %s", res.Error)
	assert.Equal(t, "I did not close TKT-3: "+RejectReason, res.Answer)
	assert.Equal(t, []string{
		"c-1:search_tickets:ok", "c-2:search_tickets:cache_hit",
		"c-3:close_ticket:blocked", "c-3:close_ticket:rejected",
	}, statuses(res.Trace))
	assert.Equal(t, Reviewer, res.Trace[3].Approver)
	assert.Equal(t, RejectReason, res.Trace[3].Reason)
	assert.JSONEq(t, string(res.Trace[0].Result), string(res.Trace[1].Result), "the memo served the first result")

	// Nothing was closed.
	ticket, err := env.Desk.Ticket(ctx, "TKT-3")
	require.NoError(t, err)
	assert.Equal(t, desk.StatusOpen, ticket.Status)

	// What the model was shown, request by request.
	assert.Empty(t, fake.Problems())
	reqs := fake.Requests()
	require.Len(t, reqs, 4, "exactly one request per planner step")
	for i, r := range reqs {
		assert.Equal(t, http.StatusOK, r.Status, "request %d", i+1)
		assert.Equal(t, "Bearer "+APIKey, r.Authorization, "request %d carries the worker's key", i+1)
		assert.Equal(t, ModelName, r.Request.Model)
		assert.Len(t, r.Request.ToolMessages(), i, "request %d", i+1)
	}
	first := reqs[0].Request
	require.GreaterOrEqual(t, len(first.Messages), 2)
	assert.Equal(t, "system", first.Messages[0].Role)
	assert.Contains(t, first.Messages[0].Text(), "Destructive tools in this run (each call needs a human's approval): close_ticket")
	assert.Equal(t, "user", first.Messages[1].Role)
	assert.Equal(t, WalkThroughGoal, first.Messages[1].Text())
	closeTool, ok := first.Tool("close_ticket")
	require.True(t, ok)
	assert.Contains(t, closeTool.Function.Description, "[destructive")

	second := toolTexts(reqs[1].Request)
	assert.True(t, strings.HasPrefix(second["c-1"], "the call succeeded; result:"), second["c-1"])
	assert.Contains(t, second["c-1"], `"TKT-3"`)

	third := toolTexts(reqs[2].Request)
	assert.True(t, strings.HasPrefix(third["c-2"], "the call succeeded; the result came from the memo"), "the second search is shown as a memo hit: %q", third["c-2"])
	assert.Contains(t, third["c-2"], `"TKT-3"`)

	fourth := toolTexts(reqs[3].Request)
	assert.True(t, strings.HasPrefix(fourth["c-3"], "not executed: rejected by "), fourth["c-3"])
	assert.Contains(t, fourth["c-3"], RejectReason)
	assert.NotContains(t, fourth["c-3"], "Do not", "the model is told what happened, not how to behave")

	// The key reached the endpoint, and nowhere else.
	hist, err := env.History(ctx, "model-walkthrough-test")
	require.NoError(t, err)
	leak, err := HistoryContains(hist, APIKey)
	require.NoError(t, err)
	assert.False(t, leak, "the API key is in the run's history")
	for _, s := range []string{ModelName, "I did not close TKT-3", RejectReason} {
		found, err := HistoryContains(hist, s)
		require.NoError(t, err)
		assert.True(t, found, "the search looks into payloads: %q should be found", s)
	}
	resJSON, err := json.Marshal(res)
	require.NoError(t, err)
	assert.NotContains(t, string(resJSON), APIKey)

	// The model's steps ran as plan.openai activities, once each.
	assert.Equal(t, []string{"plan.openai", "search_tickets", "plan.openai", "plan.openai", "plan.openai"}, scheduledActivities(hist))
}

// ---------------------------------------------------------------------------
// A model that gets its calls wrong.

func TestMalformedModelArgumentsGoBackAsErrors(t *testing.T) {
	const answer = "I could not search the tickets: my calls were refused."
	fake := newFake(t, func(req ChatRequest) (Reply, error) {
		switch n := len(req.ToolMessages()); n {
		case 0:
			return Reply{Calls: []Call{
				{Name: "search_tickets", Arguments: `{"query": "login"`}, // not JSON
				{Name: "reset_password", Arguments: `{"user":"ada@example.com"}`},
				{Name: "search_tickets", Arguments: `{"query":"login","limit":999}`}, // limit is at most 50
			}}, nil
		case 3:
			for _, m := range req.ToolMessages() {
				if !strings.HasPrefix(m.Text(), "the call failed: ") {
					return Reply{}, fmt.Errorf("call %s did not fail: %q", m.ToolCallID, m.Text())
				}
			}
			return Reply{Text: answer}, nil
		default:
			return Reply{}, fmt.Errorf("shown %d outcomes", n)
		}
	})
	env := startEnv(t, fake)
	ctx := testContext(t)

	res, err := env.Run(ctx, "model-malformed", openAIInput("Find the ticket about the login problem."))
	require.NoError(t, err)
	require.Equal(t, workflows.StatusCompleted, res.Status, "error: %s", res.Error)
	assert.Equal(t, answer, res.Answer)
	assert.Equal(t, []string{"c-1:search_tickets:error", "c-2:reset_password:error", "c-3:search_tickets:error"}, statuses(res.Trace))

	assert.Empty(t, fake.Problems())
	reqs := fake.Requests()
	require.Len(t, reqs, 2)
	out := toolTexts(reqs[1].Request)
	require.Len(t, out, 3, "one tool message per call")
	for id, text := range out {
		assert.True(t, strings.HasPrefix(text, "the call failed: "), "%s: %q", id, text)
	}
	// The model sees that its JSON is broken, and the text it wrote.
	assert.Contains(t, out["c-1"], `InvalidArguments: search_tickets: arguments are not valid JSON: {"query": "login"`)
	// An unknown tool is named, with the tools there are.
	assert.Contains(t, out["c-2"], `UnknownTool: no tool named "reset_password" is registered`)
	assert.Contains(t, out["c-2"], "search_tickets")
	// A schema violation says where and why.
	assert.Contains(t, out["c-3"], "InvalidArguments: search_tickets: arguments do not match the schema: at /limit:")
	assert.Contains(t, out["c-3"], "50")
	// And the assistant message shows the calls as the model wrote them.
	var asst *ChatMessage
	for i := range reqs[1].Request.Messages {
		if m := reqs[1].Request.Messages[i]; len(m.ToolCalls) > 0 {
			asst = &m
		}
	}
	require.NotNil(t, asst)
	require.Len(t, asst.ToolCalls, 3)
	assert.Equal(t, `{"query": "login"`, asst.ToolCalls[0].Function.Arguments)
	assert.Equal(t, "reset_password", asst.ToolCalls[1].Function.Name)

	// No tool ran.
	hist, err := env.History(ctx, "model-malformed")
	require.NoError(t, err)
	assert.Equal(t, []string{"plan.openai", "plan.openai"}, scheduledActivities(hist))
}

// ---------------------------------------------------------------------------
// A model that never answers.

func TestModelThatNeverAnswersStopsAtMaxTurns(t *testing.T) {
	queries := []string{"login", "password", "invoice", "refund", "shipping", "SAML"}
	fake := newFake(t, func(req ChatRequest) (Reply, error) {
		n := len(req.ToolMessages())
		return Reply{Calls: []Call{{Name: "search_tickets", Arguments: fmt.Sprintf(`{"query":%q}`, queries[n%len(queries)])}}}, nil
	})
	env := startEnv(t, fake)
	ctx := testContext(t)

	in := openAIInput("Keep looking.")
	in.MaxTurns = 3
	res, err := env.Run(ctx, "model-max-turns", in)
	require.NoError(t, err)
	assert.Equal(t, workflows.StatusFailed, res.Status)
	assert.Contains(t, res.Error, "max_turns (3 steps)")
	assert.Empty(t, res.Answer)
	assert.Equal(t, []string{"c-1:search_tickets:ok", "c-2:search_tickets:ok", "c-3:search_tickets:ok"}, statuses(res.Trace),
		"three different searches, none from the memo")
	assert.Len(t, fake.Requests(), 3, "exactly max_turns model requests")
	assert.Empty(t, fake.Problems())

	s, err := env.State(ctx, "model-max-turns")
	require.NoError(t, err)
	assert.Equal(t, workflows.StatusFailed, s.Status)
	assert.Contains(t, s.Error, "max_turns")
}

// ---------------------------------------------------------------------------
// Replaying the recorded walk-through.

// countingTransport counts the HTTP requests made through it, and makes none.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return nil, fmt.Errorf("no HTTP request may be made during replay (%s %s)", r.Method, r.URL.Redacted())
}

func TestReplayModelDrivenRunMakesNoHTTPRequest(t *testing.T) {
	raw, err := os.ReadFile(RecordedHistory)
	require.NoError(t, err, "regenerate it with: go run ./testsuite/model/record")

	// Any HTTP request during replay would be counted: through the default
	// transport, or at a model endpoint that the environment names.
	counting := &countingTransport{}
	saved := http.DefaultTransport
	http.DefaultTransport = counting
	t.Cleanup(func() { http.DefaultTransport = saved })
	endpoint := newFake(t, func(ChatRequest) (Reply, error) { return Reply{Text: "replay must not ask"}, nil })
	t.Setenv("OPENAI_BASE_URL", endpoint.URL())
	t.Setenv("OPENAI_API_KEY", APIKey)
	t.Setenv("OPENAI_MODEL", ModelName)

	require.NoError(t, replay.File(RecordedHistory))
	assert.Zero(t, counting.n.Load(), "HTTP requests during replay")
	assert.Empty(t, endpoint.Requests(), "model requests during replay")

	// What the replay consumed: the model's four answers, recorded as the
	// results of plan.openai activities, and used by the run.
	h, err := client.HistoryFromJSON(bytes.NewReader(raw), client.HistoryJSONOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"plan.openai", "search_tickets", "plan.openai", "plan.openai", "plan.openai"}, scheduledActivities(h))
	decisions := plannerDecisions(t, h)
	require.Len(t, decisions, 4)
	assert.Equal(t, "search_tickets", decisions[0].Calls[0].Tool)
	assert.JSONEq(t, `{"query":"login"}`, string(decisions[0].Calls[0].Args))
	assert.Equal(t, decisions[0], decisions[1], "the model asked for the same search twice")
	assert.Equal(t, "close_ticket", decisions[2].Calls[0].Tool)
	assert.JSONEq(t, `{"ticket_id":"TKT-3"}`, string(decisions[2].Calls[0].Args))
	assert.Empty(t, decisions[3].Calls)
	assert.Equal(t, "I did not close TKT-3: "+RejectReason, decisions[3].Answer)

	res := workflowResult(t, h)
	assert.Equal(t, workflows.StatusCompleted, res.Status)
	assert.Equal(t, decisions[3].Answer, res.Answer, "the run's answer is the recorded model answer")
	assert.Equal(t, []string{
		"c-1:search_tickets:ok", "c-2:search_tickets:cache_hit",
		"c-3:close_ticket:blocked", "c-3:close_ticket:rejected",
	}, statuses(res.Trace))

	assert.NotContains(t, string(raw), APIKey)
	leak, err := HistoryContains(h, APIKey)
	require.NoError(t, err)
	assert.False(t, leak, "the API key is in the recorded history")

	// The replay really follows the recorded answers: make the model's first
	// answer ask for another tool, and the same workflow code now schedules
	// get_ticket where the history has search_tickets.
	tampered := tamperFirstDecision(t, h, plan.Decision{Calls: []tool.Proposal{{Tool: "get_ticket", Args: json.RawMessage(`{"ticket_id":"TKT-3"}`)}}})
	err = replay.File(tampered)
	require.Error(t, err, "a history whose model answers were changed must not replay")
	assert.ErrorIs(t, err, replay.ErrNondeterministic, "the SDK's message depends on where the replay first diverges; its code [TMPRL1100] is what says nondeterminism")
	assert.Zero(t, counting.n.Load(), "HTTP requests during replay")
	assert.Empty(t, endpoint.Requests(), "model requests during replay")
}

// tamperFirstDecision writes a copy of h whose first plan.openai result is d.
func tamperFirstDecision(t *testing.T, h *historypb.History, d plan.Decision) string {
	t.Helper()
	var planStep int64
	for _, ev := range h.Events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && planStep == 0 && a.GetActivityType().GetName() == plan.ActivityName(plan.KindOpenAI) {
			planStep = ev.GetEventId()
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && planStep != 0 && a.GetScheduledEventId() == planStep {
			p, err := converter.GetDefaultDataConverter().ToPayloads(d)
			require.NoError(t, err)
			a.Result = &commonpb.Payloads{Payloads: p.GetPayloads()}
			b, err := MarshalHistory(h)
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), "tampered.json")
			require.NoError(t, os.WriteFile(path, b, 0o644))
			return path
		}
	}
	t.Fatal("no completed plan.openai activity in the history")
	return ""
}
