package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/tool"
)

// This file is the check, the gate and the decide stages of a call's path
// (pipeline.go). The check holds the call to its tool's schema (check.go).
// The gate is the rule itself — a destructive call goes on only with a
// "yes" for this exact call — under the worker's policy, or under the run's
// approval mode when the worker has none. Decide is how what the rules ask
// is met: by a rule, a grant, or a human.

// checkStage checks the call before the gate (check). A call that fails it
// ends with the error, and the fleet ledger never hears of it; one that
// passes holds its canonical arguments.
func (r *run) checkStage(_ workflow.Context, f *flight) stage {
	spec, err := r.check(&f.c)
	if err != nil {
		return f.endWith(outcome{Status: TraceError, Error: err.Error()}, TraceRecord{Status: TraceError, Error: err.Error()})
	}
	f.spec, f.proposed, f.counted, f.owes = spec, f.c.Args, f.c.Args, true
	return stageGate
}

// gate is the rule itself: a call passes if its tool is not destructive, or if
// it carries an approval for this exact call. Anything else raises
// ConfirmationRequired with the exact arguments.
func gate(spec tool.Spec, c tool.Call, approval *tool.Approval) *tool.ConfirmationRequired {
	if !spec.Destructive || approval != nil {
		return nil
	}
	return &tool.ConfirmationRequired{CallID: c.ID, Tool: c.Tool, CallArgs: c.Args}
}

// gateStage applies the worker's policy to the call: its rules decide
// (allow, deny or ask), and a shadow rule that held is recorded. Without a
// policy, the run's approval mode decides (modeGate).
func (r *run) gateStage(_ workflow.Context, f *flight) stage {
	if r.engine == nil {
		return r.modeGate(f)
	}
	v := r.evaluate(f.c.Tool, f.spec.Destructive, f.c.Args)
	for _, s := range v.Shadows {
		what := "shadow rule " + s.Rule + " would have decided " + string(s.Decide)
		if s.Error != "" {
			what = "shadow rule " + s.Rule + " could not be evaluated: " + s.Error
		}
		r.record(f.c, TraceRecord{Status: TraceShadow, Rule: s.Rule, Reason: what})
	}
	if v.Decide == policy.Deny {
		msg := fmt.Sprintf("%s%s of the worker's policy", plan.DeniedByRule, v.Rule)
		if v.FailedClosed {
			msg += " (" + clip(v.Error, MaxTextBytes/2) + ")"
		}
		r.record(f.c, TraceRecord{Status: TraceBlocked, Rule: v.Rule, Error: msg})
		return f.end(outcome{Status: TraceBlocked, Error: msg})
	}
	f.verdict = v
	return stageGuard
}

// modeGate is the gate without a policy: a destructive call goes on with an
// approval of the always_approve mode, waits for a human, or (mode deny) is
// refused and blocks the run.
func (r *run) modeGate(f *flight) stage {
	if f.spec.Destructive && r.policy == PolicyAlwaysApprove {
		f.approval = &tool.Approval{Approver: "policy:" + PolicyAlwaysApprove, Kind: tool.ApprovedByPolicy}
	}
	cr := gate(f.spec, f.c, f.approval)
	if cr == nil {
		if f.approval != nil {
			r.record(f.c, TraceRecord{Status: TraceApproved, Approver: f.approval.Approver})
		}
		return stageMemo
	}
	r.record(f.c, TraceRecord{Status: TraceBlocked, Error: "needs confirmation"})
	if r.policy == PolicyDeny {
		if r.blockedOn == nil {
			r.blockedOn = cr
		}
		return f.end(outcome{Status: TraceBlocked, Error: "destructive call refused by the deny policy"})
	}
	f.kind, f.question, f.asked = KindGate, "needs confirmation", nil
	return stageAsk
}

// decideStage meets the rules' verdict (or the guard's, when a guard asks):
// a rule that allows approves the call; an active grant answers an ask a
// guard did not make; what is left waits for the approvers the rule names
// — or, under the deny mode, is refused and blocks the run.
func (r *run) decideStage(_ workflow.Context, f *flight) stage {
	v := f.verdict
	if v.Decide == policy.Allow {
		if v.Rule == "" {
			return stageMemo // a read no rule holds back
		}
		f.approval = &tool.Approval{Approver: "rule:" + v.Rule, Kind: tool.ApprovedByRule}
		r.record(f.c, TraceRecord{Status: TraceApproved, Approver: f.approval.Approver, Rule: v.Rule})
		return stageMemo
	}
	if f.guardWhy == "" { // a grant never lets a call past a guard
		if f.approval = r.useGrant(f.c, v); f.approval != nil {
			return stageMemo
		}
	}
	reason := "needs confirmation"
	switch {
	case f.guardWhy != "":
		reason = f.guardWhy
	case v.Error != "":
		reason = clip(v.Error, MaxTextBytes/2) + " (so a human decides)"
	case v.Rule != "":
		reason = "rule " + v.Rule + " asks for " + v.Need.Describe()
	}
	r.record(f.c, TraceRecord{Status: TraceBlocked, Rule: v.Rule, Error: reason})
	if r.policy == PolicyDeny {
		if r.blockedOn == nil {
			r.blockedOn = &tool.ConfirmationRequired{CallID: f.c.ID, Tool: f.c.Tool, CallArgs: f.c.Args}
		}
		return f.end(outcome{Status: TraceBlocked, Error: "call refused by the deny policy: " + reason})
	}
	f.kind, f.question, f.asked = KindGate, reason, &f.verdict
	return stageAsk
}
