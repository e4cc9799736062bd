package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/signed"
)

// This file keeps every signed token to one use (rules version 5): a run
// chain remembers the tokens it has taken until they expire, and a signed
// start also claims a workflow id of its own on the server, so the same
// start token can never start a second run.

// SpentToken is a token a run chain has taken: the first half of its
// SHA-256 (hex), when it expires (Unix seconds) and, from rules version 9,
// who signed it. It is forgotten once expired: a token that has expired is
// refused anyway.
type SpentToken struct {
	ID  string `json:"id"`
	Exp int64  `json:"exp"`
	By  string `json:"by,omitempty"`
}

// MaxSpentTokens bounds the unexpired tokens a run chain remembers. Before
// rules version 9 a token past it is refused until older ones expire (at
// most signed.MaxLifetime); from version 9 the list is only a cache in front
// of the claims recorded outside the run (spent.go), and the oldest entries
// are forgotten instead.
const MaxSpentTokens = 1024

// MaxTokensPerSigner bounds the unexpired tokens one signer may have spent in
// a run chain (rules version 9), so that no signer can crowd out another:
// past it, only that signer's tokens are refused until older ones expire.
const MaxTokensPerSigner = 256

// StartMarkerWorkflow is the workflow type of a claim's marker (spent.go): a
// workflow that does nothing, whose workflow id (StartMarkerPrefix + the
// token's id for a signed start) the server keeps unique. The fleet ledger
// starts it too (ledger.MarkerWorkflow); workers register it
// (worker/worker.go, worker/authority.go).
const (
	StartMarkerWorkflow = "toolgate.start-token"
	StartMarkerPrefix   = "toolgate-start-token-"
)

// StartMarker is StartMarkerWorkflow: it ends at once. Its id is what counts.
func StartMarker(workflow.Context) error { return nil }

func tokenID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:16])
}

// checkFresh refuses a token the run chain has taken already, one valid
// for longer than the policy allows, and one past MaxSpentTokens.
func (r *run) checkFresh(token string, c signed.Claims) error {
	if life, limit := time.Duration(c.Expiry-c.IssuedAt)*time.Second, r.engine.Policy().TokenLifetime(); life > limit {
		return refusal(RefusedUnauthorized, "%s's token refused: it is valid for %s (iat to exp), longer than the %s this worker's policy allows (max_token_lifetime)",
			c.Approver, life, limit)
	}
	id, now, mine := tokenID(token), r.now().Unix(), 0
	for _, s := range r.Spent {
		if s.ID == id {
			return refusal(RefusedUnauthorized, "%s's token was taken already in this run chain: a token is taken once (sign a new one)", c.Approver)
		}
		if s.Exp > now && s.By == c.Approver {
			mine++
		}
	}
	switch {
	case r.claiming[id]:
		return refusal(RefusedUnauthorized, "%s's token is being taken by another request right now: a token is taken once", c.Approver)
	case mine >= MaxTokensPerSigner:
		return refusal(RefusedUnauthorized, "%s's token refused: %s has spent %d tokens in this run chain that are still valid, at most %d per signer "+
			"(so that no signer can crowd out another); try again once older ones expire (a token lives at most %s)",
			c.Approver, c.Approver, mine, MaxTokensPerSigner, r.engine.Policy().TokenLifetime())
	}
	return nil
}

// spend records a token the run has taken, forgetting those that expired.
func (r *run) spend(token string, c signed.Claims) {
	if token == "" {
		return
	}
	now := r.now().Unix()
	r.Spent = slices.DeleteFunc(r.Spent, func(s SpentToken) bool { return s.Exp <= now })
	r.Spent = append(r.Spent, SpentToken{ID: tokenID(token), Exp: c.Expiry, By: c.Approver})
	if over := len(r.Spent) - MaxSpentTokens; over > 0 { // a cache: the claim outside the run is the guard
		r.Spent = slices.Delete(r.Spent, 0, over)
	}
}

// claimStart makes a signed start the only run its token ever starts: it
// starts the marker child workflow under an id derived from the token,
// which the server refuses to start twice (within the namespace's
// retention, longer than any token lives).
func (r *run) claimStart(ctx workflow.Context, token string) error {
	id := StartMarkerPrefix + tokenID(token)
	err := r.startMarker(ctx, id)
	switch {
	case isUsed(err):
		return fmt.Errorf("this token has started a run already (workflow %s holds its use): a start token starts one run; sign a new one", id)
	case err != nil:
		return fmt.Errorf("recording the token's use (workflow %s): %w", id, err)
	}
	return nil
}
