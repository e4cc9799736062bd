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
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/plan"
)

// Error types of the planner's activity errors (temporal.ApplicationError.Type()).
const (
	// ErrRejected: the endpoint refused the request (a 4xx other than 408,
	// 409 and 429). Retrying the same request cannot help. Non-retryable.
	ErrRejected = plan.ErrTypeRejected
	// ErrMisconfigured: no model, or a malformed base URL. Non-retryable.
	ErrMisconfigured = plan.ErrTypeMisconfigured
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
	if !keySent && hosted(base) {
		// The hosted endpoint refuses every request without a key: asking
		// it, six times over minutes, would only say so late.
		return plan.Decision{}, temporal.NewNonRetryableApplicationError(
			"openai planner: no API key for "+endpoint+", which needs one: set OPENAI_API_KEY on the worker, "+
				"or OPENAI_BASE_URL (or planner.base_url) to a local model's endpoint (Ollama, vLLM, llama.cpp server)",
			ErrMisconfigured, nil)
	}

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

// hosted reports whether u is the library's default endpoint's host, which
// refuses every request that carries no key.
func hosted(u *url.URL) bool {
	d, err := url.Parse(DefaultBaseURL)
	return err == nil && u != nil && strings.EqualFold(u.Hostname(), d.Hostname())
}
