package workflows

import (
	"time"
)

// Names and types of the worker's approval policy (package policy) as a run
// shows and takes them: who may decide, under which rule, signed how.

// Updates that grant a tool for the rest of the run chain, and revoke a grant.
const (
	UpdateGrant  = "grant"
	UpdateRevoke = "revoke"
)

// Failure types of a refused decision under a policy, besides the Refused*
// of api.go.
const (
	// RefusedUnauthorized: the decision is not proven to come from an
	// approver who may make it — unsigned, an unknown approver, a bad
	// signature, a token for another run, call or action, expired, the wrong
	// role, self-approval, or a second decision by the same approver.
	RefusedUnauthorized = "Unauthorized"
	// RefusedEdit: edited arguments the schema or a rule refuses.
	RefusedEdit = "EditRefused"
)

// DecisionCounted is DecisionResult.Decision for an approval that counts
// towards a quorum not yet met: the call still waits.
const DecisionCounted = "counted"

// Limits of the policy's state in a run.
const (
	// MaxGrants bounds the grants a run chain holds (revoked ones count).
	MaxGrants = 32
	// MaxGrantUses bounds a grant's uses.
	MaxGrantUses = 1000
	// TokenSkew is how far in the future a token's issued-at may be (the
	// approver's clock against the workflow's).
	TokenSkew = 5 * time.Minute
)

// TokenInput is the payload of the grant and revoke updates.
type TokenInput struct {
	Token string `json:"token"`
}

// Grant is an approver's "allow this tool for this run": later calls of the
// tool that would ask for one approver (and match When) pass the gate as
// approved by grant:<approver>, while uses and time last and until revoked.
type Grant struct {
	ID   string `json:"id"` // g-1, g-2, … over the run chain
	Tool string `json:"tool"`
	When string `json:"when,omitempty"`
	// Uses is how many calls it may let through (0: no limit); Used counts them.
	Uses int `json:"uses,omitempty"`
	Used int `json:"used"`
	// Until ends it (zero: the end of the run chain).
	Until     time.Time `json:"until,omitempty"`
	By        string    `json:"by"`
	At        time.Time `json:"at"`
	RevokedBy string    `json:"revoked_by,omitempty"`
	RevokedAt time.Time `json:"revoked_at,omitempty"`
}

// active says whether the grant may still let a call through at now.
func (g Grant) active(now time.Time) bool {
	return g.RevokedBy == "" && (g.Uses == 0 || g.Used < g.Uses) && (g.Until.IsZero() || now.Before(g.Until))
}

// GrantResult is what the grant and revoke updates return.
type GrantResult struct {
	Grant Grant `json:"grant"`
}
