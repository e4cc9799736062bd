// Package signed makes and checks toolgate's signed tokens: a decision on a
// call (approve, reject), a grant and its revocation, and the start of a run,
// each a JWS in compact form signed with EdDSA (Ed25519) by an approver whose
// public key the worker's policy declares.
package signed

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Actions a token authorizes (Claims.Action).
const (
	ActionApprove = "approve"
	ActionReject  = "reject"
	// ActionRespond answers a call in the tool's place; DataDigest names the
	// response's SHA-256.
	ActionRespond = "respond"
	ActionGrant   = "grant"
	ActionRevoke  = "revoke"
	ActionStart   = "start"
	// ActionRewind rewinds a run to just before CallID's step: Source names
	// the run of the chain reset (its run id) and Preview the digest of the
	// preview the operator saw (client.RewindPreview).
	ActionRewind = "rewind"
	// ActionFork starts a fork (a start token: InputDigest signs the fork's
	// input, which names the source run and call).
	ActionFork = "fork"
	// ActionPause pauses a tool fleet-wide, in the fleet ledger of a task
	// queue (package ledger): the token's WorkflowID is the ledger's id
	// (ledger.ID(taskQueue)), its Tool the tool or "*" for every destructive
	// tool, its Reason why.
	ActionPause = "pause"
	// ActionUnpause lifts a pause: WorkflowID is the ledger's id, Tool the
	// tool paused (or "*"), Reason why.
	ActionUnpause = "unpause"
)

// MaxLifetime is the longest a token may be valid (exp - iat). A run refuses
// a token signed for longer; a policy can lower it (max_token_lifetime).
const MaxLifetime = time.Hour

// Claims are what a token says. Approver, IssuedAt and Expiry are the JWT's
// registered claims sub, iat and exp (seconds since the epoch); the rest are
// toolgate's own.
type Claims struct {
	Approver   string `json:"sub"`
	WorkflowID string `json:"wid"`
	Action     string `json:"act"`
	// CallID and ArgsDigest bind an approve or reject to one call and the
	// exact arguments its approver saw.
	CallID     string `json:"call,omitempty"`
	ArgsDigest string `json:"digest,omitempty"`
	// Kind ("gate", the default, or "interrupt") and Asked (the interrupt's
	// requested_at in Unix nanoseconds) bind a decision to the one question
	// its approver answered: a gate approval cannot answer the tool's own
	// interrupt on the same call, nor one interrupt the next.
	Kind  string `json:"kind,omitempty"`
	Asked int64  `json:"asked,omitempty"`
	// EditedDigest (approve) is the args_digest of the edited arguments the
	// approver approves instead.
	EditedDigest string `json:"edited_digest,omitempty"`
	// DataDigest (approve, kind interrupt) is the hex SHA-256 of the
	// canonical JSON of the answer the approver gives the tool (data); for
	// respond, of the response given in the tool's place.
	DataDigest string `json:"data_digest,omitempty"`
	Note       string `json:"note,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// Grant (grant) allows a tool for the rest of the run chain.
	Grant *Grant `json:"grant,omitempty"`
	// GrantID (revoke) names the grant revoked ("g-1").
	GrantID string `json:"grant_id,omitempty"`
	// GoalDigest (start) is the SHA-256 (hex) of the run's goal. Runs of
	// rules version 5 and later take InputDigest instead.
	GoalDigest string `json:"goal_digest,omitempty"`
	// InputDigest (start) is the hex SHA-256 of the canonical JSON of the
	// run's whole input with request_token left out (workflows.InputDigest):
	// the token starts that input, under that workflow id, once.
	InputDigest string `json:"input_digest,omitempty"`
	// Source (rewind) is the run id of the run of the chain that is reset,
	// and Preview the hex SHA-256 of the preview the operator signed for.
	Source  string `json:"source,omitempty"`
	Preview string `json:"preview,omitempty"`
	// Via (approve, reject; and every link token) is the channel a decision
	// came through — "slack" or "email" — when it is signed not by the
	// approver's key but by the policy's via_key, which the inbox listener
	// that took the click holds (package confirm). The policy must let the
	// approver decide that way (via).
	Via string `json:"via,omitempty"`
	// Link is the secret of one link a run's delivery sent (rules version
	// 9): in a link token, the secret the delivery drew for that link; in a
	// decision by link (Via), the secret of the link it came through. The
	// run keeps only its SHA-256 (workflows.LinkProof), so a link decides
	// only if the run sent it: one made with the link key alone does not.
	Link string `json:"link,omitempty"`
	// Reset (rewind, rules version 9) names the one reset a rewind covers:
	// the reset's request id, which its reason carries too, so the run and
	// the audit can check the token against the reset event.
	Reset string `json:"reset,omitempty"`
	// Tool (pause, unpause) is the tool paused or unpaused fleet-wide, or
	// "*": every destructive tool.
	Tool string `json:"tool,omitempty"`
	// ID is the JWT's registered claim jti: a random id (NewID) that makes
	// each token signed unique. A token is deterministic in its claims
	// (Ed25519 signatures are), and IssuedAt counts seconds: without an ID,
	// the same decision signed twice within a second is the same token, which
	// a run takes once.
	ID       string `json:"jti,omitempty"`
	IssuedAt int64  `json:"iat"`
	Expiry   int64  `json:"exp"`
}

// Grant is what a grant token allows: calls of Tool (that match When, a CEL
// expression over args and requested_by, if set), at most Uses times (0: no
// limit), until Until (seconds since the epoch; 0: the end of the run chain).
type Grant struct {
	Tool  string `json:"tool"`
	When  string `json:"when,omitempty"`
	Uses  int    `json:"uses,omitempty"`
	Until int64  `json:"until,omitempty"`
}

// NewID is a fresh random token id for Claims.ID: 16 random bytes, in hex.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics if it cannot read)
	return hex.EncodeToString(b[:])
}
