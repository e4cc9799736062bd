package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/policy"
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
	SignalRespond = "respond" // also an update of the same name
	SignalMessage = "message" // a new user turn (session runs)
	SignalEnd     = "end"     // end a session run after its current turn

	UpdateApprove = "approve"
	UpdateReject  = "reject"
	// UpdateRespond answers a waiting call in the tool's place: the tool does
	// not run, and the planner gets the human's response as the call's
	// result, marked as theirs (trace status responded). It is taken only for
	// a tool that is not destructive, or where the policy rule that asked
	// says "respond: true"; never to fake a side effect.
	UpdateRespond = "respond"

	QueryNext  = "next"
	QueryState = "state"
	QueryTrace = "trace"
	// QueryTool takes a tool's name and answers its spec as the run holds it
	// (from the worker's config recorded at its start): its argument schema,
	// so an editor can check edited arguments before sending them.
	QueryTool = "tool"

	// ConfigActivity is the local activity a run starts with: it returns the
	// worker's tool specs and policy switches, and so records them in history.
	ConfigActivity = "toolgate.config"
	// ChainActivity is the local activity a continued run starts with: it
	// describes the run it was continued from, so the carried state is taken
	// only from an AgentRun on the same task queue.
	ChainActivity = "toolgate.chain"
	// ForkActivity is the activity a fork starts with: the worker reads the
	// source run's history from the server and replays it to the fork's
	// point (ForkSource, ForkState), so a fork's state never comes from the
	// client that started it.
	ForkActivity = "toolgate.fork"

	// SignalRewound tells a run that an operator rewound it (RewindNote):
	// toolgate rewind resets the run, then sends it to the new run, which
	// records who rewound it, to which call, from which preview.
	SignalRewound = "rewound"
	// QueryCheckRewind takes a RewindNote and answers whether the run would
	// take it (the operator's token, under a policy) — before any reset.
	QueryCheckRewind = "check_rewind"
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

// Trace statuses (plan's outcome statuses: planners read them in the transcript).
const (
	TraceOK          = plan.StatusOK
	TraceCacheHit    = plan.StatusCacheHit
	TraceBlocked     = plan.StatusBlocked
	TraceApproved    = plan.StatusApproved
	TraceRejected    = plan.StatusRejected
	TraceExpired     = plan.StatusExpired
	TraceInterrupted = plan.StatusInterrupted
	TraceError       = plan.StatusError
	TraceFallback    = plan.StatusFallback
	TraceEdited      = plan.StatusEdited
	TraceResponded   = plan.StatusResponded
	TraceCancelled   = plan.StatusCancelled
	// TraceShadow: a shadow rule of the policy held (recorded, not enforced).
	TraceShadow = plan.StatusShadow
	// TraceGrant: an approver granted a tool for the run, or revoked a grant
	// (a record with no call id).
	TraceGrant = "grant"
	// TraceRewound: an operator rewound the run to just before the record's
	// call (its step); TraceForked: the run is a fork of the record's call of
	// another run (its first record).
	TraceRewound = "rewound"
	TraceForked  = "forked"
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

// RunInput starts an AgentRun. It is decoded strictly (see ParseRunInput): a
// field it does not have, a key given twice or a value out of range fails the
// run at once with InvalidInput naming the field, and nothing runs.
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
	// RequestToken is the requester's signed start (signed.ActionStart, over
	// the workflow id and the goal's SHA-256), verified against the worker's
	// policy: the run records who requested it, and that approver may then
	// approve none of its calls. A worker without a policy refuses it.
	RequestToken string `json:"request_token,omitempty"`

	// Fork starts this run as a fork of another run's call (fork.go). A fork
	// input holds nothing else but request_token: its goal, planner and
	// settings are the source run's, and its state is the source's just
	// before the call's step, both read by the worker from the server.
	Fork *Fork `json:"fork,omitempty"`

	// Carry is written only by the run itself when it continues as new, and
	// read only when the run was continued from an AgentRun on the same task
	// queue. A start that sets it is refused: it would set the run's tools,
	// policy switches, memo, trace and counters.
	Carry *Carry `json:"carry,omitempty"`

	// invalid is what UnmarshalJSON refused; the run reports it when it starts.
	invalid error
	// inputDigest is InputDigest of the input as the run received it.
	inputDigest string
}

// Defaults for RunInput fields left out.
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
	// over) while they fit in TraceBytes; older ones are counted in state
	// (trace_dropped) but dropped.
	TraceKeep = 1000
	// TranscriptKeep is how many transcript entries a planner is shown (at
	// most TranscriptBytes of them).
	TranscriptKeep = 200
)

// DecisionInput is the payload of the approve and reject signals and updates.
type DecisionInput struct {
	CallID   string `json:"call_id"`
	Approver string `json:"approver,omitempty"`
	// Via (rules version 8) is the channel the decision came through when a
	// human clicked a notification ("slack", "email"; package confirm sets
	// it): the trace records it. Under a policy it is the token's (a
	// decision by link is signed by the policy's via_key).
	Via string `json:"via,omitempty"`
	// Link (rules version 9, with Via and no policy) is the secret of the
	// link the decision came through, as the link carries it: the run takes
	// a decision by link only for a link it sent (its Delivery.Links). Under
	// a policy the secret is the token's (signed.Claims.Link).
	Link string `json:"link,omitempty"`
	// Note (approve) is kept in the trace.
	Note string `json:"note,omitempty"`
	// Reason (reject) is fed back to the planner.
	Reason string `json:"reason,omitempty"`
	// ArgsDigest must equal the pending interrupt's args_digest (state shows
	// it): the decision is bound to the exact arguments the approver saw.
	ArgsDigest string `json:"args_digest,omitempty"`
	// Kind must be "interrupt" to decide a call held by the tool's own check
	// (next shows "interrupt:<tool>"), and may be empty or "gate" for a call
	// held at the gate. So an approval meant for the gate — a duplicate, sent
	// twice — can never answer the question the tool raised afterwards.
	Kind tool.DecisionKind `json:"kind,omitempty"`
	// Token is the approver's signed decision (package signed). A worker
	// with a policy takes no decision without one; approver, note and reason
	// are then the token's.
	Token string `json:"token,omitempty"`
	// EditedArgs (approve, at the gate) approves the call with these
	// arguments instead. They are checked against the tool's schema and,
	// under a policy, its rules again, and the token names their args_digest.
	EditedArgs json.RawMessage `json:"edited_args,omitempty"`
	// Data (approve, kind interrupt) answers what the tool asked — an MCP
	// server's elicitation — with a JSON object the tool receives with the
	// approval. Under a policy the token names its SHA-256 (data_digest).
	Data json.RawMessage `json:"data,omitempty"`
	// Response (respond only) is the human's answer in the tool's place: any
	// JSON value, at most MaxResultBytes, which the planner gets as the
	// call's result. Under a policy the token (action respond) names its
	// SHA-256 (data_digest).
	Response json.RawMessage `json:"response,omitempty"`
	// Cancel (reject only): the human cancelled the call rather than said
	// no to it (trace status cancelled); the call does not run either way.
	Cancel bool `json:"cancel,omitempty"`
}

// Failure types of a refused decision (the ApplicationError type an approve
// or reject update is refused with) and of a refused start (the run fails
// with RefusedInput).
const (
	RefusedUnknownCall    = "UnknownCall"     // no such call, or not proposed yet
	RefusedNotWaiting     = "NotWaiting"      // already decided, not at the gate yet, or it never needed one
	RefusedDigestMismatch = "DigestMismatch"  // args_digest of other arguments
	RefusedDecision       = "InvalidDecision" // a payload that does not decode, a missing args_digest, a kind that does not fit
	RefusedInput          = "InvalidInput"    // a RunInput the run refuses
)

// DecisionResult is what the approve and reject updates return.
type DecisionResult struct {
	CallID   string `json:"call_id"`
	Tool     string `json:"tool"`
	Decision string `json:"decision"` // approved | rejected | cancelled | responded | counted (a quorum not met yet)
	Approver string `json:"approver,omitempty"`
	// ApprovedBy and Needed tell a quorum's progress.
	ApprovedBy []string `json:"approved_by,omitempty"`
	Needed     int      `json:"needed,omitempty"`
	// ArgsDigest is the digest of the arguments approved (the edited ones after an edit).
	ArgsDigest string `json:"args_digest,omitempty"`
}

// MessageInput is the payload of the message signal.
type MessageInput struct {
	Text string `json:"text"`
}

// Interrupt is a call waiting for a human decision.
type Interrupt struct {
	CallID     string            `json:"call_id"`
	Tool       string            `json:"tool"`
	CallArgs   json.RawMessage   `json:"call_args"`
	ArgsDigest string            `json:"args_digest"`
	Kind       tool.DecisionKind `json:"kind"` // gate | interrupt
	// Destructive is the tool's flag as the worker declares it: a pause of
	// every destructive tool stops the call once decided.
	Destructive bool      `json:"destructive,omitempty"`
	Reason      string    `json:"reason"`
	RequestedAt time.Time `json:"requested_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	// Under a policy: the rule that asked (none: the tool's default), who may
	// decide, and who has approved so far.
	Rule       string            `json:"rule,omitempty"`
	Needs      *policy.Approvers `json:"needs,omitempty"`
	ApprovedBy []string          `json:"approved_by,omitempty"`
	// OriginalArgs and EditedBy: the arguments were edited by an approver,
	// and a quorum is still approving the edited ones.
	OriginalArgs json.RawMessage `json:"original_args,omitempty"`
	EditedBy     string          `json:"edited_by,omitempty"`
}

// Interrupt kinds.
const (
	KindGate      = tool.ApprovedAtGate    // a destructive call waiting at the gate
	KindInterrupt = tool.ApprovedInterrupt // a tool that refused to commit without a human
)

// Node is the name of the node an interrupt holds back ("gate:close_ticket").
func (i Interrupt) Node() string { return string(i.Kind) + ":" + i.Tool }

// MemoStats is the memo part of state.
type MemoStats struct {
	Entries int   `json:"entries"`
	Bytes   int   `json:"bytes"`
	Hits    int64 `json:"hits"`
	Misses  int64 `json:"misses"`
}

// State is the result of the state query.
type State struct {
	Status string `json:"status"`
	// Goal is what the run was started to do.
	Goal       string      `json:"goal,omitempty"`
	Turn       int         `json:"turn"`
	Next       []string    `json:"next"`
	Interrupts []Interrupt `json:"interrupts"`
	Memo       MemoStats   `json:"memo"`
	// Queued counts the user messages received and not yet started as a turn.
	Queued int `json:"queued,omitempty"`
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
	// Policy: the worker's policy holds this run (decisions must be signed).
	Policy bool `json:"policy,omitempty"`
	// RequestedBy is the verified requester of the run, if it was signed (a
	// fork's is its source's, from rules version 9).
	RequestedBy string `json:"requested_by,omitempty"`
	// ForkedBy are the operators who forked the run (and the forks it came
	// from): like its requester, none of them may decide its calls.
	ForkedBy []string `json:"forked_by,omitempty"`
	// Grants made in this run chain, revoked ones included.
	Grants []Grant `json:"grants,omitempty"`
}

// Refusal records a signal the run refused: a decision that did not fit, a
// payload that did not decode, a message it cannot take, a signal it does not
// know. It keeps the call id, why, and the payload's size and SHA-256 — never
// the payload itself, so refusals stay small whatever was sent.
type Refusal struct {
	Signal        string    `json:"signal"`
	CallID        string    `json:"call_id,omitempty"`
	Error         string    `json:"error"`
	PayloadBytes  int       `json:"payload_bytes"`
	PayloadSHA256 string    `json:"payload_sha256"`
	At            time.Time `json:"at"`
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
	// Rule is the policy rule that decided (or, shadow, would have).
	Rule string `json:"rule,omitempty"`
	// OriginalArgs: Args are an approver's edit of these.
	OriginalArgs json.RawMessage `json:"original_args,omitempty"`
	// Via names the approvals made by a click on a notification and the
	// channel of each ("alice: slack").
	Via string    `json:"via,omitempty"`
	At  time.Time `json:"at"`
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
	// Policy is the worker's approval policy, if it has one.
	Policy *policy.Policy `json:"policy,omitempty"`
	// Notify are the worker's notification targets (--notify): names,
	// kinds and events, never an address or a secret (rules version 8).
	Notify []NotifyTarget `json:"notify,omitempty"`
}

// ChainRequest names the run a continued run was continued from.
type ChainRequest struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
}

// ChainInfo is what ChainActivity says of that run.
type ChainInfo struct {
	WorkflowType string `json:"workflow_type"`
	TaskQueue    string `json:"task_queue"`
	// Status is how the run closed (enums.WorkflowExecutionStatus's name):
	// only a run that closed ContinuedAsNew wrote its successor's input. A
	// cron or retry successor gets its predecessor's input unchanged.
	Status string `json:"status,omitempty"`
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
	// SearchAttrForkedFrom names a fork's source: "WORKFLOW_ID/CALL_ID".
	SearchAttrForkedFrom = "ToolgateForkedFrom" // Keyword
)
