// Package plan is the vocabulary between a run and its planner: what the
// planner is shown (the goal, the transcript, the registered tools) and what it
// answers (tool calls to make, or a final answer).
//
// Planners that do I/O (a model behind HTTP) run as activities, so their
// answers are in the history and replay never calls them again. The scripted
// planner is a pure function of the run's input and is evaluated in place.
package plan

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/tool"
)

// Planner kinds.
const (
	// KindScripted replays fixed steps of calls, then gives Answer.
	KindScripted = "scripted"
	// KindSupport is a small rule-based support-desk planner (an activity).
	KindSupport = "support"
	// KindOpenAI asks an OpenAI-compatible Chat Completions endpoint (an activity).
	KindOpenAI = "openai"
	// KindExternal is a planner outside the run: its calls are proposed one
	// by one through the run's propose update (an MCP client, through
	// toolgate's MCP server), never by the run's input.
	KindExternal = "external"
)

// ActivityName is the activity type a planner kind runs as.
func ActivityName(kind string) string { return "plan." + kind }

// Config chooses and configures a run's planner (RunInput.planner).
type Config struct {
	Kind string `json:"kind"`
	// Turns (scripted): planner steps, each a list of calls proposed together.
	// An empty step ends the current user turn with Answer; when the steps run
	// out the planner answers.
	Turns [][]tool.Proposal `json:"turns,omitempty"`
	// Answer (scripted): the final answer.
	Answer string `json:"answer,omitempty"`
	// Model and BaseURL (openai): which model at which endpoint. The API key is
	// never part of the run: the worker reads it from its environment.
	Model   string `json:"model,omitempty"`
	BaseURL string `json:"base_url,omitempty"`
}

// Validate reports what is wrong with a planner config, if anything.
func (c Config) Validate() error {
	switch c.Kind {
	case KindScripted:
		for i, step := range c.Turns {
			for j, p := range step {
				if p.Tool == "" {
					return fmt.Errorf("planner.turns[%d][%d]: tool is empty", i, j)
				}
			}
		}
		return nil
	case KindSupport, KindOpenAI:
		return nil
	case KindExternal:
		if len(c.Turns) > 0 || c.Answer != "" || c.Model != "" || c.BaseURL != "" {
			return fmt.Errorf("planner %q takes no turns, answer, model or base_url: its calls are proposed through the run's propose update", KindExternal)
		}
		return nil
	case "":
		return fmt.Errorf("planner.kind is empty: want %q, %q, %q or %q", KindScripted, KindSupport, KindOpenAI, KindExternal)
	default:
		return fmt.Errorf("planner.kind %q is unknown: want %q, %q, %q or %q", c.Kind, KindScripted, KindSupport, KindOpenAI, KindExternal)
	}
}

// Transcript roles.
const (
	RoleUser      = "user"      // the goal, or a later message
	RoleAssistant = "assistant" // the planner's proposals, or its answer
	RoleTool      = "tool"      // one call's outcome
)

// Outcome statuses of a call: a tool entry's Status, and a trace record's.
const (
	StatusOK          = "ok"          // ran and succeeded
	StatusCacheHit    = "cache_hit"   // answered from the memo
	StatusBlocked     = "blocked"     // held at the gate (deny policy: refused)
	StatusApproved    = "approved"    // a human (or the policy) said yes
	StatusEdited      = "edited"      // a human said yes to other arguments (the call ran with those)
	StatusRejected    = "rejected"    // a human said no; Error holds the reason
	StatusCancelled   = "cancelled"   // a human cancelled the call: it did not run
	StatusResponded   = "responded"   // a human answered in the tool's place: Result is theirs, the tool did not run
	StatusExpired     = "expired"     // no decision in time: a rejection
	StatusInterrupted = "interrupted" // the tool itself asked for a human
	StatusError       = "error"       // failed (bad call, or the tool failed)
	StatusFallback    = "fallback"    // failed, and its fallback was called
	StatusShadow      = "shadow"      // a shadow rule of the policy held: recorded, not enforced
)

// DeniedByRule starts the error of a call a deny rule of the worker's policy
// blocked: "denied by rule <id> …".
const DeniedByRule = "denied by rule "

// DeniedByLedger starts the error of a call the fleet ledger refused: a
// guard of the worker's policy at its limit, or a tool paused fleet-wide
// ("denied by the fleet ledger: guard refunds: …").
const DeniedByLedger = "denied by the fleet ledger: "

// Failure types a planner activity returns (ApplicationError.Type) for what
// retrying cannot fix: the run fails with the planner's message at once.
const (
	ErrTypeRejected      = "PlannerRejected"      // the endpoint refused the request (4xx other than 429)
	ErrTypeMisconfigured = "PlannerMisconfigured" // the worker lacks what the planner needs (a model, a key)
)

// Entry is one line of the transcript a planner sees.
type Entry struct {
	Role string `json:"role"`
	// Text: the user's words (user) or the planner's answer (assistant).
	Text string `json:"text,omitempty"`
	// Calls: what the planner proposed (assistant), numbered by the run.
	Calls []tool.Call `json:"calls,omitempty"`
	// Outcome of one call (tool).
	CallID string `json:"call_id,omitempty"`
	Tool   string `json:"tool,omitempty"`
	// Status is the call's final trace status: ok, cache_hit, rejected,
	// expired, error, blocked (deny policy).
	Status string          `json:"status,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	// Error says what went wrong (error), or why a human said no (rejected, expired).
	Error string `json:"error,omitempty"`
	// Note is what else the planner must know of the outcome: an approver
	// edited the call's arguments before approving it (the call ran with the
	// edited ones; do not retry the original).
	Note string `json:"note,omitempty"`
}

// ToolInfo is what a planner is told of a registered tool.
type ToolInfo struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Destructive bool            `json:"destructive,omitempty"`
}

// Request is a planner's input: one step of one user turn.
type Request struct {
	Goal       string     `json:"goal"`
	Transcript []Entry    `json:"transcript"`
	Tools      []ToolInfo `json:"tools"`
	// Step counts the planner steps of the whole run (0 for the first).
	Step   int    `json:"step"`
	Config Config `json:"config"`
}

// Decision is a planner's output: calls to make now (run concurrently, their
// outcomes returned in this order), or — when Calls is empty — the answer.
type Decision struct {
	Calls  []tool.Proposal `json:"calls,omitempty"`
	Answer string          `json:"answer,omitempty"`
}

// Scripted is the scripted planner: step `step` of cfg.Turns, or the answer.
// It is pure, so the workflow evaluates it in place (no activity, no events).
func Scripted(cfg Config, step int) Decision {
	if step < len(cfg.Turns) && len(cfg.Turns[step]) > 0 {
		return Decision{Calls: cfg.Turns[step]}
	}
	return Decision{Answer: cfg.Answer}
}

// ScriptedAnswer is the scripted planner's answer to a turn whose calls'
// outcomes transcript holds (the turn: the entries after its last user
// entry). A script's steps do not look at what its calls did, so its
// answer is cfg.Answer only when every call of the turn ran (or the memo
// answered it); otherwise it says which did not and why, and does not
// claim what the script's answer claims.
func ScriptedAnswer(cfg Config, transcript []Entry) string {
	start := 0
	for i := len(transcript) - 1; i >= 0; i-- {
		if transcript[i].Role == RoleUser {
			start = i + 1
			break
		}
	}
	var missed []string
	for _, e := range transcript[start:] {
		if e.Role != RoleTool {
			continue
		}
		switch e.Status {
		case StatusOK, StatusCacheHit, StatusApproved, StatusEdited:
			continue
		}
		if e.Error != "" { // the run's own words: "not executed: rejected by bob: …"
			missed = append(missed, fmt.Sprintf("%s %s: %s", e.CallID, e.Tool, clipText(e.Error, 200)))
		} else {
			missed = append(missed, fmt.Sprintf("%s %s %s", e.CallID, e.Tool, statusWords(e.Status)))
		}
	}
	if len(missed) == 0 {
		return cfg.Answer
	}
	answer := "Not done: " + strings.Join(missed, "; ") + "."
	if cfg.Answer != "" {
		answer += fmt.Sprintf(" (The script's answer, written before its calls ran: %q)", clipText(cfg.Answer, 200))
	}
	return answer
}

// statusWords says what a call's final status means, for an answer.
func statusWords(status string) string {
	switch status {
	case StatusBlocked:
		return "was refused"
	case StatusRejected:
		return "was rejected"
	case StatusExpired:
		return "was not decided in time"
	case StatusCancelled:
		return "was cancelled"
	case StatusResponded:
		return "did not run: a human answered in its place"
	case StatusError:
		return "failed"
	case StatusFallback:
		return "failed, and its fallback answered"
	}
	return "did not run (" + status + ")"
}

// clipText is s cut to at most n bytes, on a rune boundary, marked "…".
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return text.Cut(s, n) + "…"
}
