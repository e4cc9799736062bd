package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
)

// This file holds grants: an approver's signed "allow this tool for this
// run", which answers later calls the rules would ask one approver about.

// registerGrantHandlers sets up the grant and revoke updates. A refusal is
// an update failure typed like a refused decision, and leaves no trace in
// the history (the validator refuses it).
func (r *run) registerGrantHandlers(ctx workflow.Context) error {
	for _, u := range []struct {
		name  string
		apply func(signed.Claims, bool) (Grant, error)
	}{{UpdateGrant, r.grant}, {UpdateRevoke, r.revoke}} {
		check := func(raw json.RawMessage) (string, signed.Claims, error) {
			var in TokenInput
			if err := r.decode(raw, &in); err != nil {
				return "", signed.Claims{}, refusal(RefusedDecision, "%s payload refused (want {\"token\": \"…\"}): %s", u.name, clip(err.Error(), 300))
			}
			if !r.ready {
				return "", signed.Claims{}, refusal(RefusedNotWaiting, "the run is starting (loading its tools and policy): send the %s again", u.name)
			}
			if r.engine == nil {
				return "", signed.Claims{}, refusal(RefusedUnauthorized, "%s refused: grants need the worker's policy (--policy) and its signed approvers; this run has none", u.name)
			}
			c, err := r.verifyToken(in.Token)
			if err == nil {
				err = r.checkTarget(c, u.name)
			}
			if err == nil {
				_, err = u.apply(c, false)
			}
			return in.Token, c, err
		}
		err := workflow.SetUpdateHandlerWithOptions(ctx, u.name,
			func(ctx workflow.Context, raw json.RawMessage) (GrantResult, error) {
				token, c, err := check(raw)
				if err == nil {
					// Claimed on the server first (spent.go), then checked
					// again: the run may have moved on meanwhile.
					if err = r.claimToken(ctx, token, c.Approver); err == nil {
						token, c, err = check(raw)
					}
				}
				if err != nil {
					return GrantResult{}, asFailure(err)
				}
				g, err := u.apply(c, true)
				if err == nil {
					r.spend(token, c)
				}
				return GrantResult{Grant: g}, asFailure(err)
			},
			workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, raw json.RawMessage) error {
				_, _, err := check(raw)
				return asFailure(err)
			}})
		if err != nil {
			return err
		}
	}
	return nil
}

// grant checks a verified grant token and, with apply, adds the grant.
func (r *run) grant(c signed.Claims, apply bool) (Grant, error) {
	g := c.Grant
	switch {
	case g == nil:
		return Grant{}, refusal(RefusedDecision, "%s's token grants nothing: it has no grant claim", c.Approver)
	case len(r.Grants) >= MaxGrants:
		return Grant{}, refusal(RefusedDecision, "grant refused: this run chain holds %d grants already, at most %d", len(r.Grants), MaxGrants)
	case g.Uses < 0 || g.Uses > MaxGrantUses:
		return Grant{}, refusal(RefusedDecision, "grant refused: uses %d: want 0 (no limit) to %d", g.Uses, MaxGrantUses)
	case g.Until != 0 && !time.Unix(g.Until, 0).After(r.now()):
		return Grant{}, refusal(RefusedDecision, "grant refused: it ends at %s, which has passed", time.Unix(g.Until, 0).UTC().Format(time.RFC3339))
	case r.selfOf(c.Approver) != "":
		return Grant{}, refusal(RefusedUnauthorized, "self-approval refused: %s, so may grant nothing in it", r.selfOf(c.Approver))
	}
	if _, ok := r.specs[g.Tool]; !ok {
		return Grant{}, refusal(RefusedDecision, "grant refused: no tool named %q is registered", clip(g.Tool, MaxNameBytes))
	}
	if err := r.engine.Policy().Eligible(c.Approver, r.engine.Policy().ToolApprovers(g.Tool)); err != nil {
		return Grant{}, refusal(RefusedUnauthorized, "wrong role to grant %s: %s", g.Tool, clip(err.Error(), 300))
	}
	var x *policy.Expr
	if g.When != "" {
		var err error
		if x, err = r.engine.CompileExpr(g.When); err != nil {
			return Grant{}, refusal(RefusedDecision, "grant refused: when: %s", clip(err.Error(), 500))
		}
	}
	out := Grant{ID: fmt.Sprintf("g-%d", len(r.Grants)+1), Tool: g.Tool, When: g.When, Uses: g.Uses, By: c.Approver, At: r.now()}
	if g.Until != 0 {
		out.Until = time.Unix(g.Until, 0).UTC()
	}
	if !apply {
		return out, nil
	}
	r.Grants = append(r.Grants, out)
	r.exprs[out.ID] = x
	r.recordGrant(out, c.Approver, "granted "+out.describe())
	return out, nil
}

// revoke checks a verified revoke token and, with apply, revokes the grant:
// its granter may, and so may an approver who shares a role with them.
func (r *run) revoke(c signed.Claims, apply bool) (Grant, error) {
	i := -1
	for j, g := range r.Grants {
		if g.ID == c.GrantID {
			i = j
		}
	}
	if i < 0 {
		return Grant{}, refusal(RefusedDecision, "revoke refused: this run chain has no grant %q", clip(c.GrantID, MaxNameBytes))
	}
	g := &r.Grants[i]
	switch {
	case g.RevokedBy != "":
		return Grant{}, refusal(RefusedDecision, "revoke refused: grant %s was revoked by %s already", g.ID, g.RevokedBy)
	case c.Approver != g.By && !r.engine.Policy().ShareRole(c.Approver, g.By):
		return Grant{}, refusal(RefusedUnauthorized, "revoke refused: grant %s is %s's; only they or an approver who shares a role with them may revoke it", g.ID, g.By)
	}
	if apply {
		g.RevokedBy, g.RevokedAt = c.Approver, r.now()
		r.recordGrant(*g, c.Approver, "revoked "+g.ID)
	}
	return *g, nil
}

// useGrant answers a call the rules ask one approver about with a grant that
// covers it, if one does, and counts the use. A grant never answers a call
// that needs a quorum, nor one its granter could not approve, nor a verdict
// reached by failing closed (a rule could not be evaluated).
func (r *run) useGrant(c tool.Call, v policy.Verdict) *tool.Approval {
	if v.Need.Count > 1 || v.FailedClosed {
		return nil
	}
	now := r.now()
	for i := range r.Grants {
		g := &r.Grants[i]
		if g.Tool != c.Tool || !g.active(now) || r.selfOf(g.By) != "" || r.engine.Policy().Eligible(g.By, v.Need) != nil {
			continue
		}
		if g.When != "" {
			x, ok := r.exprs[g.ID]
			if !ok { // compiled before continue-as-new: compile it again
				x, _ = r.engine.CompileExpr(g.When)
				r.exprs[g.ID] = x
			}
			if x == nil {
				continue
			}
			if match, err := x.Match(c.Tool, c.Args, r.RequestedBy); err != nil || !match {
				continue
			}
		}
		g.Used++
		a := &tool.Approval{Approver: "grant:" + g.By, Note: g.ID, Kind: tool.ApprovedByGrant}
		r.record(c, TraceRecord{Status: TraceApproved, Approver: a.Approver, Rule: v.Rule,
			Reason: fmt.Sprintf("grant %s, use %d%s", g.ID, g.Used, usesOf(g.Uses))})
		return a
	}
	return nil
}

func usesOf(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" of %d", n)
}

func (g Grant) describe() string {
	s := fmt.Sprintf("%s: %s by %s", g.ID, g.Tool, g.By)
	if g.When != "" {
		s += " when " + g.When
	}
	if g.Uses > 0 {
		s += fmt.Sprintf(", %d uses", g.Uses)
	}
	if !g.Until.IsZero() {
		s += ", until " + g.Until.Format(time.RFC3339)
	}
	return s
}

// recordGrant keeps a grant's making or revoking in the trace.
func (r *run) recordGrant(g Grant, by, what string) {
	r.record(tool.Call{Tool: g.Tool}, TraceRecord{Status: TraceGrant, Approver: by, Reason: what})
}
