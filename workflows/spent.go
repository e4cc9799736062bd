package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// This file keeps what a run chain has spent where no reset rolls it back.
// A reset — toolgate's rewind, or the stock CLI's, with or without reapply —
// rolls a run's state back, and with it the chain's list of spent tokens
// (tokens.go): a token copied from the old history would be taken again. So
// every signed act a run takes (a decision, a grant, a revoke, a rewind note)
// is first claimed on the server: a local activity of the worker
// (ClaimActivity) starts a marker workflow (StartMarkerWorkflow, which does
// nothing) under a workflow id derived from the token, with the id reuse
// policy REJECT_DUPLICATE, in the authority namespace (package authority),
// where no client of the runs may write. The server refuses a second start
// of that id for as long as the namespace keeps closed workflows (its
// retention, days; a token lives an hour at most), nobody can delete a
// marker to give a token back, or start it first to make an honest use fail.
// A signed start and a fork claim their token so too (claimStart). A
// decision by link is claimed per link and approver: the link's secret
// decides once for each approver. The claim knows its claimant — the run and
// the local activity that claims — so the same claim after a retry or a
// crash is the owner's again, and a reset run (another run id) is refused.
//
// The spent list in the run's state stays, as a cache: an update validator
// cannot start a workflow, so it refuses a token the chain has just taken
// without a history event.

// claimState holds the uses being claimed on the server now.
type claimState struct {
	claiming map[string]bool
}

// SpentMarkerPrefix starts the workflow id of a use claimed on the server
// (rules version 9): SpentMarkerPrefix + the token's id, or + "link-" and
// the digest of a link's secret and the approver who used it.
const SpentMarkerPrefix = "toolgate-spent-"

// claimUse records one use, named id, on the server: it starts the marker
// child workflow SpentMarkerPrefix+id, which the server refuses to start
// twice. what says what is used ("alice's token"), for the refusal.
func (r *run) claimUse(ctx workflow.Context, id, what string) error {
	if r.claiming[id] {
		return refusal(RefusedUnauthorized, "%s is being taken by another request right now: it is taken once", what)
	}
	r.claiming[id] = true
	defer delete(r.claiming, id)
	wid := SpentMarkerPrefix + id
	switch err := r.startMarker(ctx, wid); {
	case isUsed(err):
		return refusal(RefusedUnauthorized, "%s was used already: its use is recorded on the server (workflow %s), outside the run, "+
			"so no reset or rewind gives it back; it is used once (sign a new one)", what, wid)
	case err != nil:
		return refusal(RefusedUnauthorized, "recording the use of %s (workflow %s) failed: %s; nothing was decided, send it again",
			what, wid, clip(errorText(err), 300))
	}
	return nil
}

// claimToken claims a signed token's use (under a policy).
func (r *run) claimToken(ctx workflow.Context, token, approver string) error {
	if r.engine == nil || token == "" {
		return nil
	}
	return r.claimUse(ctx, tokenID(token), approver+"'s token")
}

// claimDecision claims a signed decision's use: a decision by link is
// claimed as its link's use by its approver (the listener signs a new token
// for each click, so the link is what is spent), any other as its token.
func (r *run) claimDecision(ctx workflow.Context, d ruling) error {
	if r.engine == nil {
		return nil
	}
	if d.via != "" {
		return r.claimUse(ctx, linkUseID(d.link, d.by), "this "+d.via+" link, for "+d.by+",")
	}
	return r.claimToken(ctx, d.token, d.by)
}

// linkUseID names one approver's use of one link: the first half of the
// SHA-256 of the link's secret and the approver's name.
func linkUseID(secret, approver string) string {
	sum := sha256.Sum256([]byte(secret + "\x00" + approver))
	return "link-" + hex.EncodeToString(sum[:16])
}

// ClaimActivity is the local activity that claims one use (ClaimRequest): the worker starts the marker in the authority
// namespace for the run and the local activity that claims. It fails with
// an ApplicationError of type UsedError when the use is another's.
const ClaimActivity = "toolgate.claim"

// UsedError is the type of ClaimActivity's error when the use was claimed
// by another claimant.
const UsedError = "ToolgateUsed"

// ClaimRequest is one use to claim: the marker's workflow id.
type ClaimRequest struct {
	WorkflowID string `json:"workflow_id"`
}

// startMarker claims the use wid: a local activity that starts its marker
// in the authority namespace.
func (r *run) startMarker(ctx workflow.Context, wid string) error {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    10 * time.Second,
		ScheduleToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: 5 * time.Second,
			NonRetryableErrorTypes: []string{UsedError}},
	})
	err := workflow.ExecuteLocalActivity(lctx, ClaimActivity, ClaimRequest{WorkflowID: wid}).Get(ctx, nil)
	r.localSince++
	return err
}

// isUsed reports whether err says a use was claimed already: the server's
// refusal of a marker child's start, or ClaimActivity's UsedError.
func isUsed(err error) bool {
	if temporal.IsWorkflowExecutionAlreadyStartedError(err) {
		return true
	}
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.Type() == UsedError
}
