package audit

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/tool"
)

// This file ties an executed call to the grant that let it through.

// matchGrant: a grant let the call run. The rules must ask one approver
// for what ran (a grant answers no allow, deny, quorum or verdict reached
// by failing closed), and the grant the run names — verified, applied,
// made before the call, for its tool, by an approver who may decide it and
// did not request the run, not revoked, not past its end or its uses —
// must match what ran (its when).
func (a *auditor) matchGrant(x *Execution, spec tool.Spec, ap *tool.Approval) (string, error) {
	by, id := strings.TrimPrefix(ap.Approver, "grant:"), ap.Note
	if err := a.canEvaluate(); err != nil {
		return "", fmt.Errorf("grant %s by %s let it run and %v", id, by, err)
	}
	v := a.evaluate(x.Tool, spec.Destructive, x.Args)
	switch {
	case v.Decide != policy.Ask:
		return "", fmt.Errorf("grant %s by %s let it run, and for these arguments the policy decides %s: a grant answers only an ask", id, by, describeVerdict(v))
	case v.FailedClosed:
		return "", fmt.Errorf("grant %s by %s let it run, and the policy decides %s: a grant never answers a verdict reached by failing closed", id, by, describeVerdict(v))
	case v.Need.Count > 1:
		return "", fmt.Errorf("grant %s by %s let it run, and the policy decides %s: a grant never answers a quorum", id, by, describeVerdict(v))
	case a.barred(by):
		return "", fmt.Errorf("grant %s is by %s, who %s the run and may let none of its calls through", id, by, a.barredAs(by))
	}
	if err := a.pol.Eligible(by, v.Need); err != nil {
		return "", fmt.Errorf("grant %s by %s let it run, and %s may not decide it (%s): %v", id, by, by, describeVerdict(v), err)
	}
	g, err := a.grantFor(x, by, id)
	if err != nil {
		return "", err
	}
	if g.When != "" {
		expr, err := a.engine.CompileExpr(g.When)
		if err != nil {
			return "", fmt.Errorf("grant %s's condition does not compile: %v", id, err)
		}
		if ok, err := expr.Match(x.Tool, x.Args, a.reqBy); err != nil || !ok {
			why := "these arguments do not match it"
			if err != nil {
				why = "it cannot be evaluated on these arguments: " + err.Error()
			}
			return "", fmt.Errorf("grant %s by %s lets %s through only when %s, and %s", id, by, g.Tool, g.When, why)
		}
	}
	what := fmt.Sprintf("grant %s by %s (%s", id, by, g.Tool)
	if g.When != "" {
		what += " when " + g.When
	}
	what += "), answering " + describeVerdict(v)
	if g.carried {
		x.Unbound = true
		return "", fmt.Errorf("%s was made in an earlier run of the chain: its token is verified in that run's history", what)
	}
	return what, nil
}

// grantOf is a grant as the audit checks a call against it.
type grantOf struct {
	Tool, When string
	carried    bool // handed over by the chain's previous run: no token here
}

// grantFor finds the grant id by by that let call x run: in this history,
// a verified, applied grant token made before the call, neither revoked nor
// past its end or uses when it ran; else one the previous run of the chain
// handed over.
func (a *auditor) grantFor(x *Execution, by, id string) (grantOf, error) {
	for i, e := range a.rep.Entries {
		if e.Kind != KindGrant || e.Result != id {
			continue
		}
		c, verified := a.claims[i]
		switch { // (a grant the run refused has no id: it is not found)
		case !verified || c.Grant == nil:
			return grantOf{}, fmt.Errorf("grant %s, which let it run, does not verify: %s", id, e.Problem)
		case c.Approver != by || c.Grant.Tool != x.Tool:
			return grantOf{}, fmt.Errorf("grant %s is %s's for %s, not %s's for %s", id, c.Approver, c.Grant.Tool, by, x.Tool)
		case e.EventID >= x.EventID:
			return grantOf{}, fmt.Errorf("grant %s was made after the call ran", id)
		case c.Grant.Until != 0 && !x.At.Before(time.Unix(c.Grant.Until, 0)):
			return grantOf{}, fmt.Errorf("grant %s ended at %s, before the call ran", id, time.Unix(c.Grant.Until, 0).UTC().Format(time.RFC3339))
		}
		if r := a.revoked(id, x.EventID); r != "" {
			return grantOf{}, fmt.Errorf("grant %s was revoked by %s before the call ran", id, r)
		}
		if n := a.countUse(id, x.CallID); c.Grant.Uses > 0 && n > c.Grant.Uses {
			return grantOf{}, fmt.Errorf("grant %s allows %d uses, and this call is its use %d", id, c.Grant.Uses, n)
		}
		return grantOf{Tool: c.Grant.Tool, When: c.Grant.When}, nil
	}
	for _, g := range a.carried {
		if g.ID == id && g.By == by && g.Tool == x.Tool {
			return grantOf{Tool: g.Tool, When: g.When, carried: true}, nil
		}
	}
	return grantOf{}, fmt.Errorf("no grant %s by %s for %s in this history, nor handed over by the chain's previous run", id, by, x.Tool)
}

// revoked names who revoked grant id, by a verified, applied revoke made
// before event before; "" if nobody did.
func (a *auditor) revoked(id string, before int64) string {
	for i, e := range a.rep.Entries {
		if c, ok := a.claims[i]; ok && e.Kind == KindRevoke && e.Applied && c.GrantID == id && e.EventID < before {
			return c.Approver
		}
	}
	return ""
}

// countUse counts a call as a use of grant id (once per call) and returns
// how many calls have used it so far.
func (a *auditor) countUse(id, callID string) int {
	if a.grantUses == nil {
		a.grantUses = map[string][]string{}
	}
	if !slices.Contains(a.grantUses[id], callID) {
		a.grantUses[id] = append(a.grantUses[id], callID)
	}
	return len(a.grantUses[id])
}
