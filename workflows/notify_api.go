package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/toolgate/toolgate/policy"
)

// NotifyActivity is the activity that delivers one notification to one
// target (package notify implements it; the worker registers it when it is
// started with --notify). A run schedules it, never waits on it to decide,
// and records its outcome in the trace (TraceNotified, TraceNotifyFailed).
const NotifyActivity = "toolgate.notify"

// The events a run notifies (Notification.Event).
const (
	NotifyWaiting = "waiting" // a call waits for a human decision
	NotifyDecided = "decided" // a waiting call was decided (approved, edited, rejected, cancelled, responded)
	NotifyExpired = "expired" // no decision came in time
	NotifyBlocked = "blocked" // the run ended blocked (a deny-policy run stopped at a call)
	NotifyFailed  = "failed"  // the run ended failed
)

// NotifyEvents lists every event, in the order docs/notifications.md gives them.
var NotifyEvents = []string{NotifyWaiting, NotifyDecided, NotifyExpired, NotifyBlocked, NotifyFailed}

// Trace statuses of notifications.
const (
	TraceNotified     = "notified"      // a delivery succeeded: Reason says to which target and how
	TraceNotifyFailed = "notify_failed" // a delivery failed after its retries: Error says why
)

// Notice reports whether a trace status records a notification's delivery
// (who was told) rather than what became of the call.
func Notice(status string) bool {
	switch status {
	case TraceNotified, TraceNotifyFailed, TraceReserved, TraceReleased:
		return true
	}
	return false
}

// NotifyTarget is a notification target as the worker declares it to its
// runs (WorkerConfig.Notify): its name, its kind and the events it takes. No
// address or secret is ever part of it: the run's history records it.
type NotifyTarget struct {
	Name   string   `json:"name"`
	Kind   string   `json:"kind"` // webhook | slack | email
	Events []string `json:"events"`
}

// Recipient is an approver who may decide a waiting call, as the run's
// policy declares them: their name and where they are reached.
type Recipient struct {
	Name  string `json:"name"`
	Email string `json:"email,omitempty"`
	Slack string `json:"slack,omitempty"` // a Slack user id ("U0123ABCD")
	// Via are the channels (slack, email) through which this approver may
	// decide by link, with no signature of their own.
	Via []string `json:"via,omitempty"`
}

// Notification is one event for one target: the input of NotifyActivity.
// It holds what a human needs to decide (or learn of) the call, bounded as
// the run's own state is.
type Notification struct {
	Event  string `json:"event"`
	Target string `json:"target"`
	// WorkflowID and RunID name the run; Status is its status now.
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Status     string `json:"status"`
	// The call (waiting, decided, expired; blocked names the call a
	// deny-policy run stopped at).
	CallID     string          `json:"call_id,omitempty"`
	Tool       string          `json:"tool,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	ArgsDigest string          `json:"args_digest,omitempty"`
	Kind       string          `json:"kind,omitempty"` // gate | interrupt
	// Reason says why the call waits (waiting), or what ended it.
	Reason string `json:"reason,omitempty"`
	Rule   string `json:"rule,omitempty"`
	// Needs and Approvers say who may decide: under a policy, how many of
	// which roles, and each approver who is eligible (the requester left
	// out); with no policy, both are empty (any operator may).
	Needs       *policy.Approvers `json:"needs,omitempty"`
	Approvers   []Recipient       `json:"approvers,omitempty"`
	RequestedAt time.Time         `json:"requested_at,omitzero"`
	ExpiresAt   time.Time         `json:"expires_at,omitzero"`
	// Decision and By (decided): the outcome (a trace status) and who.
	Decision string `json:"decision,omitempty"`
	By       string `json:"by,omitempty"`
	// Error says why the run failed (failed).
	Error string    `json:"error,omitempty"`
	At    time.Time `json:"at"`
}

// Delivery is what NotifyActivity reports of a delivery that succeeded.
type Delivery struct {
	Target string `json:"target"`
	Kind   string `json:"kind"`
	// Detail says what was sent where, without secrets ("HTTP 200",
	// "2 messages to alice@example.com, bob@example.com").
	Detail string `json:"detail"`
	// Key is the delivery's idempotency key (the Idempotency-Key header).
	Key string `json:"key"`
	// Links are the links the delivery sent (rules version 9), its earlier
	// attempts' included: only their secrets' digests. A decision by link
	// counts only with the secret of one of them. A failed delivery reports
	// them as its error's details (or its last heartbeat's).
	Links []LinkProof `json:"links,omitempty"`
}

// LinkProof is what a run keeps of a link its delivery sent: the digest of
// the link's secret (LinkDigest), who it was sent to (an approver's name,
// an address, a Slack or webhook target's name) and through which channel
// (slack, email, webhook). The secret itself is only in the link: whoever
// reads the history learns nothing that decides.
type LinkProof struct {
	Digest    string `json:"digest"`
	Recipient string `json:"to"`
	Channel   string `json:"via"`
}

// LinkDigest is the digest a run keeps of a link's secret: the first half
// of its SHA-256, hex.
func LinkDigest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:16])
}

// MaxLinkProofs bounds the links a waiting call keeps (every delivery's,
// retries included); a link sent past it decides nothing, and the trace
// says so.
const MaxLinkProofs = 64
