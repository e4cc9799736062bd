// Package openai is toolgate's LLM planner: it asks an OpenAI-compatible Chat
// Completions endpoint (OpenAI, or a local server such as Ollama or
// llama.cpp) what to do next, using tool calling, and runs as the Temporal
// activity plan.ActivityName(plan.KindOpenAI).
//
// The planner only proposes. Whether a tool is destructive, whether a call may
// run, argument validation and unknown tools are the workflow's business; the
// planner passes the model's proposals through (see Decision) and never fails
// the activity because the model said something odd.
//
// Retries: the library's own retries are switched off, so the activity's retry
// policy (set by the workflow) is the one retry mechanism. Errors are
// classified as:
//
//   - 408, 409, 429, 5xx, network errors and timeouts: retryable
//     (ApplicationError type PlannerUnavailable; a Retry-After header becomes
//     the next retry delay);
//   - any other 4xx (400, 401, 403, 404, 413, 422, …): non-retryable
//     ApplicationError type PlannerRejected, with the status code and the
//     endpoint's own message;
//   - no model configured, or a malformed base URL: non-retryable
//     ApplicationError type PlannerMisconfigured.
//
// The API key is the worker's: it is read from the worker's options or
// environment, never from the run input, and it is redacted from every error
// and log line this package produces.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.temporal.io/sdk/activity"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
)

// Error types of the planner's activity errors (temporal.ApplicationError.Type()).
const (
	// ErrRejected: the endpoint refused the request (a 4xx other than 408,
	// 409 and 429). Retrying the same request cannot help. Non-retryable.
	ErrRejected = "PlannerRejected"
	// ErrMisconfigured: no model, or a malformed base URL. Non-retryable.
	ErrMisconfigured = "PlannerMisconfigured"
	// ErrUnavailable: rate limited, a server error, a network error or a
	// timeout. Retryable within the activity's retry policy.
	ErrUnavailable = "PlannerUnavailable"
)

const (
	// DefaultTimeout bounds one HTTP request when Options.Timeout is zero.
	DefaultTimeout = 60 * time.Second
	// DefaultBaseURL is the library's default endpoint, used when neither the
	// options nor OPENAI_BASE_URL name one.
	DefaultBaseURL = "https://api.openai.com/v1/"
	// NoAnswer is the answer given when the model returned neither text nor calls.
	NoAnswer = "(the model gave no answer)"
	// RefusedPrefix starts the answer when the model refused.
	RefusedPrefix = "refused: "

	// maxRetryAfter caps the delay a Retry-After header may ask for (the
	// workflow's planner retry policy waits at most a minute between attempts).
	maxRetryAfter = time.Minute
	// maxErrorText caps the endpoint message quoted in an error.
	maxErrorText = 600
)

// Options configure a Planner. They belong to the worker: a run can choose the
// model and the base URL (plan.Config), never the key.
type Options struct {
	// BaseURL of the endpoint, e.g. "http://localhost:11434/v1". Default:
	// OPENAI_BASE_URL, else the library default (DefaultBaseURL).
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>". Default: OPENAI_API_KEY.
	// It may be empty for local servers (Ollama, llama.cpp); then no
	// Authorization header is sent.
	APIKey string
	// Model is the default model. Default: OPENAI_MODEL. plan.Config.Model
	// overrides it per run.
	Model string
	// Timeout bounds one HTTP request. Default: DefaultTimeout.
	Timeout time.Duration
	// HTTPClient is optional; the library's default client is used otherwise.
	HTTPClient *http.Client
}

// OptionsFromEnv reads OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL.
func OptionsFromEnv() Options {
	return Options{
		BaseURL: strings.TrimSpace(os.Getenv("OPENAI_BASE_URL")),
		APIKey:  strings.TrimSpace(os.Getenv("OPENAI_API_KEY")),
		Model:   strings.TrimSpace(os.Getenv("OPENAI_MODEL")),
		Timeout: DefaultTimeout,
	}
}

// Planner is the OpenAI-compatible planner. It is safe for concurrent use.
type Planner struct {
	client  oai.Client
	base    *url.URL // the worker's endpoint
	baseErr error    // the worker's BaseURL did not parse
	key     string
	model   string
}

// New returns a Planner. Fields of opts left empty take their defaults from
// the environment (see Options); a malformed BaseURL is reported by Plan as a
// PlannerMisconfigured error.
func New(opts Options) *Planner {
	env := OptionsFromEnv()
	if opts.BaseURL == "" {
		opts.BaseURL = env.BaseURL
	}
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultBaseURL
	}
	if opts.APIKey == "" {
		opts.APIKey = env.APIKey
	}
	if opts.Model == "" {
		opts.Model = env.Model
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	p := &Planner{key: opts.APIKey, model: opts.Model}
	p.base, p.baseErr = parseBaseURL(opts.BaseURL)

	copts := []option.RequestOption{
		// The library would otherwise retry 408/409/429/5xx and network errors
		// itself; the activity's retry policy is the one retry mechanism.
		option.WithMaxRetries(0),
		option.WithRequestTimeout(opts.Timeout),
		// Always set explicitly, so an ambient OPENAI_API_KEY or
		// OPENAI_BASE_URL read by the library never wins over the options.
		option.WithAPIKey(opts.APIKey),
	}
	if p.baseErr == nil {
		copts = append(copts, option.WithBaseURL(p.base.String()))
	}
	if opts.HTTPClient != nil {
		copts = append(copts, option.WithHTTPClient(opts.HTTPClient))
	}
	p.client = oai.NewClient(copts...)
	return p
}

// Plan asks the model for the next step of req. It is registered as the
// activity plan.ActivityName(plan.KindOpenAI).
func (p *Planner) Plan(ctx context.Context, req plan.Request) (plan.Decision, error) {
	logger := loggerFor(ctx)

	model := strings.TrimSpace(req.Config.Model)
	if model == "" {
		model = p.model
	}
	if model == "" {
		return plan.Decision{}, temporal.NewNonRetryableApplicationError(
			"openai planner: no model: set planner.model in the run input, or OPENAI_MODEL on the worker",
			ErrMisconfigured, nil)
	}
	if p.baseErr != nil {
		return plan.Decision{}, temporal.NewNonRetryableApplicationError(
			p.redact("openai planner: the worker's base URL: "+p.baseErr.Error()), ErrMisconfigured, nil)
	}

	base := p.base
	keySent := p.key != ""
	var reqOpts []option.RequestOption
	if s := strings.TrimSpace(req.Config.BaseURL); s != "" {
		u, err := parseBaseURL(s)
		if err != nil {
			return plan.Decision{}, temporal.NewNonRetryableApplicationError(
				p.redact("openai planner: planner.base_url: "+err.Error()), ErrMisconfigured, nil)
		}
		base = u
		reqOpts = append(reqOpts, option.WithBaseURL(u.String()))
		if !sameOrigin(u, p.base) {
			// The worker's key belongs to the worker's endpoint. A run may
			// point the planner elsewhere (a local model), but it must not be
			// able to make the worker send its key to a host of its choosing.
			reqOpts = append(reqOpts, option.WithAPIKey(""))
			keySent = false
		}
	}
	endpoint := describeEndpoint(base)

	params := oai.ChatCompletionNewParams{
		Model:    shared.ChatModel(model),
		Messages: buildMessages(req),
		Tools:    buildTools(req.Tools),
	}
	if len(params.Tools) > 0 {
		// Only allowed (by OpenAI) when tools are given.
		params.ParallelToolCalls = oai.Bool(true)
	}

	var httpResp *http.Response
	reqOpts = append(reqOpts, option.WithResponseInto(&httpResp))
	resp, err := p.client.Chat.Completions.New(ctx, params, reqOpts...)
	if err != nil {
		aerr := p.transportError(err, httpResp, endpoint, keySent)
		logger.Warn("openai planner exchange failed",
			"model", model, "endpoint", endpoint, "messages", len(params.Messages), "error", aerr.Error())
		return plan.Decision{}, aerr
	}
	if resp == nil || len(resp.Choices) == 0 {
		aerr := temporal.NewApplicationError(
			fmt.Sprintf("openai planner: POST %s answered without choices", endpoint), ErrUnavailable)
		logger.Warn("openai planner exchange failed",
			"model", model, "endpoint", endpoint, "messages", len(params.Messages), "error", aerr.Error())
		return plan.Decision{}, aerr
	}

	choice := resp.Choices[0]
	dec, malformed := decide(choice.Message, req.Tools, logger)
	logger.Info("openai planner exchange",
		"model", model,
		"response_model", resp.Model,
		"endpoint", endpoint,
		"messages", len(params.Messages),
		"tools", len(params.Tools),
		"tool_calls", len(dec.Calls),
		"malformed_calls", malformed,
		"finish_reason", choice.FinishReason,
		"prompt_tokens", resp.Usage.PromptTokens,
		"completion_tokens", resp.Usage.CompletionTokens,
	)
	return dec, nil
}

// ---------------------------------------------------------------------------
// Request: messages and tools.

// systemPrompt explains the agent's job and the rules it is held to.
const systemPrompt = `You are the planner of an AI agent run by toolgate, a durable and safe tool executor.
Your job: reach the user's goal by calling the tools you are given, then answer the user.

How it works:
- Propose tool calls with the tool-calling interface. Calls you propose together run concurrently; you get each call's outcome as a tool message.
- Arguments must be a JSON object that matches the tool's parameter schema.
- Destructive tools (marked below and in their descriptions) never run without a human's approval of that exact call. The run pauses until a human decides; you will then learn whether the call ran or was rejected.
- A call that was rejected (or got no decision in time, which counts as a rejection) must not be proposed again with the same arguments. Read the reason, then change the plan, or explain to the user why you stopped.
- A call that failed tells you why; fix the arguments or choose another way. Do not repeat a failing call unchanged.
- A result marked "from the memo" is the stored result of the same call made earlier in this session.
- When you are done (or cannot go on), stop calling tools and answer the user in plain text.`

func systemMessage(tools []plan.ToolInfo) string {
	var destructive []string
	for _, t := range tools {
		if t.Destructive {
			destructive = append(destructive, t.Name)
		}
	}
	s := systemPrompt
	if len(destructive) > 0 {
		s += "\n\nDestructive tools in this run (each call needs a human's approval): " + strings.Join(destructive, ", ") + "."
	} else if len(tools) > 0 {
		s += "\n\nNone of the tools in this run is destructive."
	}
	return s
}

// buildMessages renders the goal and the transcript as Chat Completions
// messages. The run's call ids ("c-3") are used as tool_call ids, so each tool
// message pairs exactly with the call it answers. The sequence is always
// valid: an outcome missing for a call gets a placeholder tool message, and an
// outcome whose call is not in view (the transcript is trimmed to its most
// recent entries) is left out.
func buildMessages(req plan.Request) []oai.ChatCompletionMessageParamUnion {
	msgs := []oai.ChatCompletionMessageParamUnion{oai.SystemMessage(systemMessage(req.Tools))}

	// The goal opens the conversation unless the transcript starts with it.
	firstUser := -1
	for i, e := range req.Transcript {
		if e.Role == plan.RoleUser {
			firstUser = i
			break
		}
	}
	if req.Goal != "" && (firstUser < 0 || req.Transcript[firstUser].Text != req.Goal) {
		msgs = append(msgs, oai.UserMessage(req.Goal))
	}

	// pending: call ids of the last assistant message still waiting for an
	// outcome, in the order they were proposed.
	var pending []string
	pendingTool := map[string]string{}
	flush := func() {
		for _, id := range pending {
			msgs = append(msgs, oai.ToolMessage(
				fmt.Sprintf("no outcome was recorded for this call (%s); assume it did not run", pendingTool[id]), id))
		}
		pending = nil
		clear(pendingTool)
	}

	for _, e := range req.Transcript {
		switch e.Role {
		case plan.RoleUser:
			flush()
			if strings.TrimSpace(e.Text) == "" {
				continue
			}
			msgs = append(msgs, oai.UserMessage(e.Text))
		case plan.RoleAssistant:
			flush()
			if strings.TrimSpace(e.Text) == "" && len(e.Calls) == 0 {
				continue
			}
			var asst oai.ChatCompletionAssistantMessageParam
			if e.Text != "" {
				asst.Content.OfString = oai.String(e.Text)
			}
			for i, c := range e.Calls {
				id := c.ID
				if _, dup := pendingTool[id]; id == "" || dup {
					// Should not happen: tool_call ids must be unique.
					id = fmt.Sprintf("call-%d-%d", len(msgs), i)
				}
				asst.ToolCalls = append(asst.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
						ID: id,
						Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      c.Tool,
							Arguments: argumentsText(c.Args),
						},
					},
				})
				pending = append(pending, id)
				pendingTool[id] = c.Tool
			}
			msgs = append(msgs, oai.ChatCompletionMessageParamUnion{OfAssistant: &asst})
		case plan.RoleTool:
			i := indexOf(pending, e.CallID)
			if i < 0 {
				continue // its call is not in view, or it was answered already
			}
			pending = append(pending[:i], pending[i+1:]...)
			delete(pendingTool, e.CallID)
			msgs = append(msgs, oai.ToolMessage(outcomeText(e), e.CallID))
		}
	}
	flush()
	return msgs
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// argumentsText is a call's arguments as the model wrote them. Arguments that
// were not valid JSON travel as a JSON string (see decide); they are shown to
// the model as the text it wrote.
func argumentsText(args json.RawMessage) string {
	raw := bytes.TrimSpace(args)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// outcomeText tells the model, in words and JSON, what became of a call.
func outcomeText(e plan.Entry) string {
	result := strings.TrimSpace(string(e.Result))
	withResult := func(words string) string {
		if result == "" {
			return words + " (no result)"
		}
		return words + "; result:\n" + result
	}
	reason := strings.TrimSpace(e.Error)
	switch e.Status {
	case "ok":
		return withResult("the call succeeded")
	case "cache_hit":
		return withResult("the call succeeded; the result came from the memo (the same call was made earlier in this session)")
	case "rejected":
		if reason == "" {
			reason = "no reason given"
		}
		return "a human rejected this call: " + reason + "\nDo not propose it again with the same arguments."
	case "expired":
		return "no human decision came in time; treated as rejected\nDo not propose it again with the same arguments."
	case "error":
		if reason == "" {
			reason = "no error message"
		}
		return "the call failed: " + reason
	case "blocked":
		s := "the call was blocked: this run does not allow destructive calls"
		if reason != "" {
			s += ": " + reason
		}
		return s
	default:
		s := "the call ended with status " + strconv.Quote(e.Status)
		if reason != "" {
			s += ": " + reason
		}
		if result != "" {
			s += "; result:\n" + result
		}
		return s
	}
}

// emptySchema is sent for a tool that declares no parameter schema.
func emptySchema() shared.FunctionParameters {
	return shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
}

// buildTools offers each registered tool as a function tool.
func buildTools(tools []plan.ToolInfo) []oai.ChatCompletionToolUnionParam {
	out := make([]oai.ChatCompletionToolUnionParam, 0, len(tools))
	for _, t := range tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schemaParameters(t.Schema)}
		desc := strings.TrimSpace(t.Description)
		if t.Destructive {
			if desc != "" {
				desc += " "
			}
			desc += "[destructive: every call needs a human's approval before it runs]"
		}
		if desc != "" {
			fn.Description = oai.String(desc)
		}
		out = append(out, oai.ChatCompletionFunctionTool(fn))
	}
	return out
}

// schemaParameters is a tool's JSON schema as function parameters; an empty
// (or unusable) schema becomes an object schema without properties.
func schemaParameters(schema json.RawMessage) shared.FunctionParameters {
	if len(bytes.TrimSpace(schema)) == 0 {
		return emptySchema()
	}
	// Plain float64 numbers: the library's encoder writes a json.Number as a string.
	var m map[string]any
	if err := json.Unmarshal(schema, &m); err != nil || len(m) == 0 {
		return emptySchema()
	}
	return shared.FunctionParameters(m)
}

// ---------------------------------------------------------------------------
// Response: the decision.

// decide turns the model's message into a decision and counts the calls with
// malformed arguments or unknown tools.
//
// Calls the model got wrong do not fail the activity, and no new protocol is
// invented for them: every call is returned as a tool.Proposal and the
// workflow, which validates arguments against the schema and rejects unknown
// tools anyway, answers the model with a clear error for that call.
//
//   - Arguments that are valid JSON are passed through exactly as given, even
//     when they break the tool's schema or name an unknown tool.
//   - Arguments that are not JSON at all are encoded as a JSON string value
//     (json.Marshal of the raw text): a proposal's Args must be valid JSON to
//     cross the activity boundary, and a string is not an object, so the
//     workflow's check rejects it ("arguments must be a JSON object").
//   - Empty arguments (some servers send "" for a tool without parameters)
//     mean {}.
//
// The planner validates each call itself too (each schema compiled once per
// Plan call), only to log what was wrong.
func decide(msg oai.ChatCompletionMessage, tools []plan.ToolInfo, logger tlog.Logger) (plan.Decision, int) {
	type rawCall struct{ name, args string }
	var calls []rawCall
	for _, tc := range msg.ToolCalls {
		switch tc.Type {
		case "custom":
			calls = append(calls, rawCall{tc.Custom.Name, tc.Custom.Input})
		default:
			args := tc.Function.Arguments
			if args == "" {
				// Some servers send the arguments as an object, not a string.
				if raw := strings.TrimSpace(tc.Function.JSON.Arguments.Raw()); strings.HasPrefix(raw, "{") {
					args = raw
				}
			}
			calls = append(calls, rawCall{tc.Function.Name, args})
		}
	}
	//lint:ignore SA1019 the deprecated single function_call is still sent by some local servers
	if fc := msg.FunctionCall; len(calls) == 0 && fc.Name != "" {
		calls = append(calls, rawCall{fc.Name, fc.Arguments})
	}

	if len(calls) > 0 {
		v := newValidator(tools)
		dec := plan.Decision{Calls: make([]tool.Proposal, 0, len(calls))}
		malformed := 0
		for _, c := range calls {
			args, problem := normalizeArgs(c.args)
			if problem == "" {
				problem = v.check(c.name, args)
			}
			if problem != "" {
				malformed++
				logger.Warn("openai planner: the model proposed a call the workflow will refuse",
					"tool", c.name, "problem", problem)
			}
			dec.Calls = append(dec.Calls, tool.Proposal{Tool: c.name, Args: args})
		}
		return dec, malformed
	}
	if msg.Refusal != "" {
		return plan.Decision{Answer: RefusedPrefix + msg.Refusal}, 0
	}
	if strings.TrimSpace(msg.Content) != "" {
		return plan.Decision{Answer: msg.Content}, 0
	}
	return plan.Decision{Answer: NoAnswer}, 0
}

// normalizeArgs returns the arguments to propose, and what is wrong with them
// when they are not JSON.
func normalizeArgs(s string) (json.RawMessage, string) {
	t := strings.TrimSpace(s)
	if t == "" {
		return json.RawMessage("{}"), ""
	}
	if json.Valid([]byte(t)) {
		return json.RawMessage(t), ""
	}
	b, _ := json.Marshal(s) // a string always marshals
	return json.RawMessage(b), "arguments are not valid JSON"
}

// validator checks proposed arguments against the tools' schemas, compiling
// each schema once (for one Plan call).
type validator struct {
	tools    map[string]plan.ToolInfo
	compiled map[string]*jsonschema.Schema
	failed   map[string]error
}

func newValidator(tools []plan.ToolInfo) *validator {
	v := &validator{
		tools:    make(map[string]plan.ToolInfo, len(tools)),
		compiled: map[string]*jsonschema.Schema{},
		failed:   map[string]error{},
	}
	for _, t := range tools {
		v.tools[t.Name] = t
	}
	return v
}

func (v *validator) schema(name string) (*jsonschema.Schema, error) {
	if s, ok := v.compiled[name]; ok {
		return s, nil
	}
	if err, ok := v.failed[name]; ok {
		return nil, err
	}
	raw := v.tools[name].Schema
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	s, err := compileSchema(raw)
	if err != nil {
		v.failed[name] = err
		return nil, err
	}
	v.compiled[name] = s
	return s, nil
}

func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // never load a $ref from disk or network
	const loc = "toolgate:///schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// check returns what is wrong with a call's (valid JSON) arguments, or "".
func (v *validator) check(name string, args json.RawMessage) string {
	if _, ok := v.tools[name]; !ok {
		return fmt.Sprintf("unknown tool %q", name)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return "arguments are not valid JSON"
	}
	if _, ok := inst.(map[string]any); !ok {
		return "arguments must be an object"
	}
	s, err := v.schema(name)
	if err != nil {
		return "" // the tool's own schema is unusable: leave it to the workflow
	}
	if err := s.Validate(inst); err != nil {
		return "arguments break the schema: " + oneLine(err.Error())
	}
	return ""
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// ---------------------------------------------------------------------------
// Errors.

// transportError classifies a failed request as an activity error. Its text
// names the endpoint, the status and the endpoint's message, with the key
// redacted; no error of the library is kept as a cause, so nothing unredacted
// crosses the activity boundary.
func (p *Planner) transportError(err error, res *http.Response, endpoint string, keySent bool) error {
	status, msg := 0, ""
	var apiErr *oai.Error
	if errors.As(err, &apiErr) {
		status = apiErr.StatusCode
		msg = apiErr.Message
		if msg == "" {
			msg = apiErr.RawJSON()
		}
		if res == nil {
			res = apiErr.Response
		}
	} else if res != nil && res.StatusCode >= 400 {
		status = res.StatusCode
	}
	if status != 0 && strings.TrimSpace(msg) == "" && res != nil && res.Body != nil {
		// An error body that is not OpenAI's JSON shape (a proxy's page, a
		// local server's plain text): quote its beginning.
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		msg = string(b)
	}

	if status == 0 {
		text := fmt.Sprintf("openai planner: POST %s failed: %s", endpoint, err.Error())
		return temporal.NewApplicationError(p.clip(text), ErrUnavailable)
	}

	msg = strings.TrimSpace(oneLine(msg))
	if msg == "" {
		msg = "no message"
	}
	text := fmt.Sprintf("openai planner: POST %s answered %d %s: %s", endpoint, status, http.StatusText(status), msg)
	if status == http.StatusUnauthorized && !keySent {
		text += " (no API key was sent: the worker has none, or the run's base_url is not the worker's endpoint, and the worker's key is only sent there)"
	}
	text = p.clip(text)

	switch {
	case status == http.StatusRequestTimeout, status == http.StatusConflict,
		status == http.StatusTooManyRequests, status >= 500:
		opts := temporal.ApplicationErrorOptions{}
		if d, ok := retryAfter(res); ok {
			opts.NextRetryDelay = d
		}
		return temporal.NewApplicationErrorWithOptions(text, ErrUnavailable, opts)
	default:
		return temporal.NewNonRetryableApplicationError(text, ErrRejected, nil)
	}
}

// retryAfter reads Retry-After-Ms or Retry-After (seconds or an HTTP date).
func retryAfter(res *http.Response) (time.Duration, bool) {
	if res == nil {
		return 0, false
	}
	var d time.Duration
	if v := res.Header.Get("Retry-After-Ms"); v != "" {
		ms, err := strconv.ParseFloat(v, 64)
		if err != nil || ms <= 0 {
			return 0, false
		}
		d = time.Duration(ms * float64(time.Millisecond))
	} else if v := res.Header.Get("Retry-After"); v != "" {
		if secs, err := strconv.ParseFloat(v, 64); err == nil {
			if secs <= 0 {
				return 0, false
			}
			d = time.Duration(secs * float64(time.Second))
		} else if t, err := http.ParseTime(v); err == nil {
			d = time.Until(t)
		}
	}
	if d <= 0 {
		return 0, false
	}
	return min(d, maxRetryAfter), true
}

var (
	bearerPattern = regexp.MustCompile(`(?i)\bbearer\s+[^\s"',;]+`)
	skPattern     = regexp.MustCompile(`\bsk-[A-Za-z0-9_\-*.]{3,}`)
)

// redact removes the API key (and anything that looks like a bearer token or
// an OpenAI-style key) from s.
func (p *Planner) redact(s string) string {
	if p.key != "" {
		s = strings.ReplaceAll(s, p.key, "[redacted]")
	}
	s = bearerPattern.ReplaceAllString(s, "Bearer [redacted]")
	return skPattern.ReplaceAllString(s, "sk-[redacted]")
}

// clip redacts s, then bounds its length (redacting first, so a cut can never
// leave a piece of the key behind).
func (p *Planner) clip(s string) string {
	s = p.redact(s)
	if len(s) <= maxErrorText {
		return s
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// ---------------------------------------------------------------------------
// Endpoints and logging.

// parseBaseURL accepts an absolute http(s) URL.
func parseBaseURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL", redactURLText(s))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an absolute http(s) URL", u.Redacted())
	}
	if u.Path != "" && !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		if u.RawPath != "" {
			u.RawPath += "/"
		}
	}
	return u, nil
}

// redactURLText drops anything before an "@" of text that did not parse as a URL.
func redactURLText(s string) string {
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return "…@" + s[i+1:]
	}
	return s
}

// sameOrigin reports whether a and b have the same scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	if a == nil || b == nil {
		return false
	}
	return strings.EqualFold(a.Scheme, b.Scheme) &&
		strings.EqualFold(a.Hostname(), b.Hostname()) &&
		effectivePort(a) == effectivePort(b)
}

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// describeEndpoint is the chat completions URL without user info or query:
// safe to log and to put in errors.
func describeEndpoint(base *url.URL) string {
	if base == nil {
		return "chat/completions"
	}
	u := url.URL{Scheme: base.Scheme, Host: base.Host, Path: base.Path}
	return strings.TrimSuffix(u.String(), "/") + "/chat/completions"
}

// loggerFor is the activity's logger, or a silent one outside an activity.
func loggerFor(ctx context.Context) tlog.Logger {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	return tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
}
