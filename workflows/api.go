package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
)

// Names operators and other programs rely on (DESIGN.md, "Temporal contract").
const (
	// TaskQueue is the default task queue.
	TaskQueue = "toolgate"
	// WorkflowName is the workflow type of a run.
	WorkflowName = "AgentRun"

	SignalApprove = "approve" // also an update of the same name
	SignalReject  = "reject"  // also an update of the same name
	SignalMessage = "message" // a new user turn (session runs)
	SignalEnd     = "end"     // end a session run after its current turn

	UpdateApprove = "approve"
	UpdateReject  = "reject"

	QueryNext  = "next"
	QueryState = "state"
	QueryTrace = "trace"

	// ConfigActivity is the local activity a run starts with: it returns the
	// worker's tool specs and policy switches, and so records them in history.
	ConfigActivity = "toolgate.config"
)

// Approval policies (RunInput.approval).
const (
	PolicyHuman         = "human"
	PolicyDeny          = "deny"
	PolicyAlwaysApprove = "always_approve"
)

// Run statuses (state.status, RunResult.status).
const (
	StatusRunning            = "running"
	StatusWaitingForApproval = "waiting_for_approval"
	StatusWaitingForInput    = "waiting_for_input"
	StatusCompleted          = "completed"
	StatusBlocked            = "blocked"
	StatusFailed             = "failed"
)

// Trace statuses.
const (
	TraceOK          = "ok"
	TraceCacheHit    = "cache_hit"
	TraceBlocked     = "blocked"
	TraceApproved    = "approved"
	TraceRejected    = "rejected"
	TraceExpired     = "expired"
	TraceInterrupted = "interrupted"
	TraceError       = "error"
	TraceFallback    = "fallback"
)

// Duration is a time.Duration written in JSON as Go duration text ("24h", "90s").
type Duration time.Duration

// MarshalJSON writes the duration as text.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads duration text ("24h") or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("duration: want text such as \"24h\": %w", err)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// RunInput starts an AgentRun.
type RunInput struct {
	Goal    string      `json:"goal"`
	Planner plan.Config `json:"planner"`
	// Approval is the policy for destructive calls: human (default), deny or always_approve.
	Approval string `json:"approval,omitempty"`
	// ApprovalTimeout: an approval that has not come by then counts as a rejection (default 24h).
	ApprovalTimeout Duration `json:"approval_timeout,omitempty"`
	// MaxTurns bounds the planner steps of one user turn (default 20).
	MaxTurns int `json:"max_turns,omitempty"`
	// Session runs wait for the next message after each answer.
	Session bool `json:"session,omitempty"`
	// IdleTimeout ends a session that got no message for this long (default 24h).
	IdleTimeout Duration `json:"idle_timeout,omitempty"`
	// HistoryLimit continues the run as new once its history has this many
	// events (default DefaultHistoryLimit), or earlier when Temporal suggests it.
	HistoryLimit int `json:"history_limit,omitempty"`
	// MemoEntries and MemoBytes bound the memo (defaults 256 entries, 1 MiB).
	MemoEntries int `json:"memo_entries,omitempty"`
	MemoBytes   int `json:"memo_bytes,omitempty"`

	// Carry is set by the run itself when it continues as new. Clients leave it empty.
	Carry *Carry `json:"carry,omitempty"`
}

// Defaults for RunInput fields left zero.
const (
	DefaultApprovalTimeout = 24 * time.Hour
	DefaultIdleTimeout     = 24 * time.Hour
	DefaultMaxTurns        = 20
	DefaultMemoEntries     = 256
	DefaultMemoBytes       = 1 << 20
	// DefaultHistoryLimit keeps every run of a long session under Temporal's
	// 10,240-event warning, whatever the server suggests.
	DefaultHistoryLimit = 8000
	// MaxCallsPerStep bounds the calls one planner step may propose.
	MaxCallsPerStep = 64
	// TraceKeep is how many trace records a run keeps at least (and carries
	// over); older ones are counted in state (trace_dropped) but dropped.
	TraceKeep = 1000
	// TranscriptKeep is how many transcript entries a planner is shown.
	TranscriptKeep = 200
)

// DecisionInput is the payload of the approve and reject signals and updates.
type DecisionInput struct {
	CallID   string `json:"call_id"`
	Approver string `json:"approver,omitempty"`
	// Note (approve) is kept in the trace.
	Note string `json:"note,omitempty"`
	// Reason (reject) is fed back to the planner.
	Reason string `json:"reason,omitempty"`
	// ArgsDigest, when given, must equal the pending interrupt's args_digest:
	// the decision is then bound to the exact arguments the approver saw.
	ArgsDigest string `json:"args_digest,omitempty"`
	// Kind must be "interrupt" to decide a call held by the tool's own check
	// (next shows "interrupt:<tool>"), and may be empty or "gate" for a call
	// held at the gate. So an approval meant for the gate — a duplicate, sent
	// twice — can never answer the question the tool raised afterwards.
	Kind string `json:"kind,omitempty"`
}

// DecisionResult is what the approve and reject updates return.
type DecisionResult struct {
	CallID   string `json:"call_id"`
	Tool     string `json:"tool"`
	Decision string `json:"decision"` // approved | rejected
	Approver string `json:"approver,omitempty"`
}

// MessageInput is the payload of the message signal.
type MessageInput struct {
	Text string `json:"text"`
}

// Interrupt is a call waiting for a human decision.
type Interrupt struct {
	CallID      string          `json:"call_id"`
	Tool        string          `json:"tool"`
	CallArgs    json.RawMessage `json:"call_args"`
	ArgsDigest  string          `json:"args_digest"`
	Kind        string          `json:"kind"` // gate | interrupt
	Reason      string          `json:"reason"`
	RequestedAt time.Time       `json:"requested_at"`
	ExpiresAt   time.Time       `json:"expires_at"`
}

// Interrupt kinds.
const (
	KindGate      = tool.ApprovedAtGate    // a destructive call waiting at the gate
	KindInterrupt = tool.ApprovedInterrupt // a tool that refused to commit without a human
)

// Node is the name of the node an interrupt holds back ("gate:close_ticket").
func (i Interrupt) Node() string { return i.Kind + ":" + i.Tool }

// MemoStats is the memo part of state.
type MemoStats struct {
	Entries int   `json:"entries"`
	Bytes   int   `json:"bytes"`
	Hits    int64 `json:"hits"`
	Misses  int64 `json:"misses"`
}

// State is the result of the state query.
type State struct {
	Status     string      `json:"status"`
	Turn       int         `json:"turn"`
	Next       []string    `json:"next"`
	Interrupts []Interrupt `json:"interrupts"`
	Memo       MemoStats   `json:"memo"`
	// Calls is the number of calls numbered so far (the last call id is c-<Calls>).
	Calls int `json:"calls"`
	// Answer is the planner's last answer, if any.
	Answer string `json:"answer,omitempty"`
	// Error says why a failed run failed.
	Error string `json:"error,omitempty"`
	// BlockedOn is the call a deny-policy run stopped at.
	BlockedOn *tool.ConfirmationRequired `json:"blocked_on,omitempty"`
	// Refused lists the most recent decisions the run refused, and why.
	Refused []Refusal `json:"refused,omitempty"`
	// TraceDropped counts trace records no longer kept (see TraceKeep).
	TraceDropped int `json:"trace_dropped,omitempty"`
}

// Refusal records a decision signal the run refused.
type Refusal struct {
	Signal string        `json:"signal"`
	Input  DecisionInput `json:"input"`
	Error  string        `json:"error"`
	At     time.Time     `json:"at"`
}

// TraceRecord is one event of the append-only trace.
type TraceRecord struct {
	Seq      int             `json:"seq"`
	Turn     int             `json:"turn"`
	CallID   string          `json:"call_id"`
	Tool     string          `json:"tool"`
	Args     json.RawMessage `json:"args,omitempty"`
	Status   string          `json:"status"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
	Attempts int32           `json:"attempts,omitempty"`
	Approver string          `json:"approver,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	At       time.Time       `json:"at"`
}

// RunResult is the result of an AgentRun.
type RunResult struct {
	Status    string                     `json:"status"`
	Answer    string                     `json:"answer,omitempty"`
	Error     string                     `json:"error,omitempty"`
	BlockedOn *tool.ConfirmationRequired `json:"blocked_on,omitempty"`
	Trace     []TraceRecord              `json:"trace"`
}

// WorkerConfig is what the ConfigActivity returns: the worker's declared
// tools and switches, recorded in the run's history when it starts.
type WorkerConfig struct {
	Tools []tool.Spec `json:"tools"`
	// Planners lists the planner kinds the worker runs as activities
	// (the scripted planner needs none).
	Planners []string `json:"planners,omitempty"`
	// AllowAutoApprove: the worker was started allowing always_approve runs.
	AllowAutoApprove bool `json:"allow_auto_approve"`
	// SearchAttributes: the namespace has toolgate's search attributes, so the
	// run keeps them current.
	SearchAttributes bool `json:"search_attributes"`
}

// MetricPrefix starts the name of every counter a run emits: toolgate_ok,
// toolgate_cache_hit, toolgate_cache_miss, toolgate_blocked, toolgate_approved,
// toolgate_rejected, toolgate_expired, toolgate_interrupted, toolgate_error,
// toolgate_fallback and toolgate_retry, each tagged with the tool.
const MetricPrefix = "toolgate_"

// Search attributes a run keeps current when WorkerConfig.SearchAttributes is set.
const (
	SearchAttrStatus       = "ToolgateStatus"       // Keyword
	SearchAttrPendingTools = "ToolgatePendingTools" // KeywordList
)
