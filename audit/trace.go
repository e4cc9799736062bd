package audit

import (
	"errors"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// trace adds the decisions the run took by itself (rules, grants) from the
// trace in its result, and names the rule and tool of each human decision.
func (a *auditor) trace() {
	if a.runRes == nil {
		return
	}
	ruleOf, toolOf := map[string]string{}, map[string]string{}
	for _, r := range a.runRes.Trace {
		if r.CallID == "" {
			continue
		}
		toolOf[r.CallID] = r.Tool
		switch r.Status {
		case workflows.TraceBlocked, workflows.TraceApproved, workflows.TraceEdited, workflows.TraceRejected,
			workflows.TraceCancelled, workflows.TraceResponded:
			if r.Rule != "" {
				ruleOf[r.CallID] = r.Rule
			}
		}
	}
	for i := range a.rep.Entries {
		e := &a.rep.Entries[i]
		switch e.Kind {
		case KindApprove, KindReject, KindRespond, KindUnsigned:
			e.Rule, e.Tool = ruleOf[e.CallID], toolOf[e.CallID]
		case KindFork:
			e.Tool = toolOf[e.CallID]
		}
	}
	for _, r := range a.runRes.Trace {
		e := Entry{At: r.At, EventID: a.traceAt, Via: ViaTrace, CallID: r.CallID, Tool: r.Tool, Rule: r.Rule, Applied: true}
		var err error
		switch {
		case r.Status == workflows.TraceApproved && strings.HasPrefix(r.Approver, "rule:"):
			e.Kind, e.Approver, e.Result = KindRule, r.Approver, string(policy.Allow)
			if strings.TrimPrefix(r.Approver, "rule:") != r.Rule {
				err = fmt.Errorf("the trace names rule %q and approver %q", r.Rule, r.Approver)
			} else {
				err = a.checkRule(r, policy.Allow)
			}
		case r.Status == workflows.TraceBlocked && r.Rule != "" && r.Approver == "" && strings.HasPrefix(r.Error, plan.DeniedByRule):
			e.Kind, e.Approver, e.Result = KindRule, "rule:"+r.Rule, string(policy.Deny)
			err = a.checkRule(r, policy.Deny)
		case r.Status == workflows.TraceApproved && strings.HasPrefix(r.Approver, "grant:"):
			e.Kind, e.Approver, e.Result = KindGrantUse, r.Approver, r.Reason
			err = a.checkGrantUse(r)
		default:
			continue
		}
		if d, derr := tool.Digest(r.Tool, r.Args); derr == nil && len(r.Args) > 0 {
			e.Digest = d
		}
		e.Verified = err == nil
		if err != nil {
			e.Problem = err.Error()
		}
		a.rep.Entries = append(a.rep.Entries, e)
	}
}

// checkRule evaluates the policy's rules again on the call's recorded
// arguments, as the run's rules version did: they must decide want by the
// rule the trace names.
func (a *auditor) checkRule(r workflows.TraceRecord, want policy.Decide) error {
	switch {
	case a.pol == nil:
		return errors.New("no policy to check the rule against: the history records none (pass one)")
	case a.engErr != nil:
		return fmt.Errorf("the policy does not compile: %v", a.engErr)
	case len(r.Args) == 0:
		return errors.New("the trace does not keep the call's arguments")
	}
	var spec *tool.Spec
	if a.config != nil {
		for i := range a.config.Tools {
			if a.config.Tools[i].Name == r.Tool {
				spec = &a.config.Tools[i]
			}
		}
	}
	if spec == nil {
		return fmt.Errorf("tool %q is not in the worker's recorded config", r.Tool)
	}
	v := a.evaluate(r.Tool, spec.Destructive, r.Args)
	if v.Rule != r.Rule || v.Decide != want {
		got := "no rule"
		if v.Rule != "" {
			got = "rule " + v.Rule
		}
		return fmt.Errorf("the policy decides %s (%s) for these arguments, not %s by rule %s", v.Decide, got, want, r.Rule)
	}
	return nil
}

// checkGrantUse finds the verified, applied grant a call passed by: the one
// the trace names ("grant g-1, use 1"), by the approver and for the tool.
func (a *auditor) checkGrantUse(r workflows.TraceRecord) error {
	by := strings.TrimPrefix(r.Approver, "grant:")
	id, _, _ := strings.Cut(strings.TrimPrefix(r.Reason, "grant "), ",")
	for _, e := range a.rep.Entries {
		if e.Kind != KindGrant || e.Result != id {
			continue
		}
		switch {
		case !e.Applied:
			return fmt.Errorf("grant %s was refused by the run", id)
		case !e.Verified:
			return fmt.Errorf("grant %s does not verify: %s", id, e.Problem)
		case e.Approver != by || e.Tool != r.Tool:
			return fmt.Errorf("grant %s is %s's for %s, not %s's for %s", id, e.Approver, e.Tool, by, r.Tool)
		}
		return nil
	}
	return fmt.Errorf("no grant %q by %s in this history (one made in an earlier run of the chain is in its history)", id, by)
}
