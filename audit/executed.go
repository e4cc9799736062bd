package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// Execution is one call the run executed that needed a decision: a call of
// a tool the run's recorded specs declare destructive, any call that ran
// with an approval, and — under a policy — a call a rule holds back. The
// audit matches the arguments it ran with (the tool.Request its
// ActivityTaskScheduled event holds) to what let it run: the approvals
// that sign their digest, the rule that allows them, or the grant whose
// condition they meet.
type Execution struct {
	At time.Time
	// EventID is its ActivityTaskScheduled event; for a local activity, the
	// event holding the trace its arguments were read from.
	EventID int64
	CallID  string
	Tool    string
	// Local: the tool ran as a local activity, whose marker does not record
	// its input: Args are the ones the run's trace records for the call.
	Local  bool
	Args   json.RawMessage // what ran
	Digest string          // its args_digest (tool.Digest)
	// By is what let it run as the run recorded it (the request's approval):
	// "bob, carol", "rule:small-refunds", "grant:carol",
	// "policy:always_approve"; "" for nothing.
	By   string
	Kind tool.DecisionKind // the approval's kind: gate, interrupt, rule, grant, policy
	// Basis is what the audit found that let it run, when Matched:
	// "approved by bob, carol (2 of 2 …)", "rule small-refunds allows these
	// arguments", "grant g-1 by carol …".
	Basis   string
	Matched bool
	// Unbound: the history cannot tie the call to what let it run, and that
	// is no failure (Problem says why): approvals without args_digest, which
	// runs before rules version 3 took; a grant made in an earlier run of the
	// chain; a local activity whose arguments the history does not hold.
	Unbound bool
	// Problem says why it is not Matched: the call, what ran and what was
	// approved.
	Problem string
}

// executions checks every tool activity the run scheduled (and every local
// one its trace shows) against what let it run.
func (a *auditor) executions() {
	specs := map[string]tool.Spec{}
	if a.config != nil {
		for _, s := range a.config.Tools {
			specs[s.Name] = s
		}
	}
	previous := map[string]int64{} // call id -> the event of its previous round
	for _, rc := range a.ran {
		spec, known := specs[rc.tool]
		switch {
		case a.config != nil && !known, a.config == nil && rc.bad != "":
			continue // not a tool: a planner's activity
		case rc.bad != "":
			a.rep.Executions = append(a.rep.Executions, Execution{At: rc.at, EventID: rc.eventID, Tool: rc.tool,
				Problem: fmt.Sprintf("tool %s's activity does not hold a tool request (%s): what it ran with cannot be told", rc.tool, rc.bad)})
			continue
		}
		x := Execution{At: rc.at, EventID: rc.eventID, CallID: rc.req.CallID, Tool: rc.tool, Args: rc.req.Args}
		if ap := rc.req.Approval; ap != nil {
			x.By = ap.Approver
		}
		after := previous[x.CallID]
		previous[x.CallID] = rc.eventID
		if a.config == nil {
			x.Problem = fmt.Sprintf("%s %s ran %s, but the history records no tool specs (no %s marker, nor a carry from the chain's previous run): "+
				"whether the call needed a decision cannot be told", x.CallID, x.Tool, clipArgs(x.Args), workflows.ConfigActivity)
			a.rep.Executions = append(a.rep.Executions, x)
			continue
		}
		if !a.needsDecision(spec, x.Args, rc.req.Approval) {
			continue
		}
		a.match(&x, spec, rc.req.Approval, after, rc.eventID)
		a.rep.Executions = append(a.rep.Executions, x)
	}
	a.localExecutions(specs)
}

// needsDecision says whether a call had to be let through: a destructive
// tool's, one that ran with an approval, or one a rule of the policy holds
// back (anything but an allow with no rule).
func (a *auditor) needsDecision(spec tool.Spec, args []byte, ap *tool.Approval) bool {
	if spec.Destructive || ap != nil {
		return true
	}
	if a.canEvaluate() != nil {
		return false
	}
	v := a.evaluate(spec.Name, false, args)
	return v.Decide != policy.Allow || v.Rule != ""
}

// kindOf is what kind of decision an approval is; one recorded before
// approvals named their kind is told by its approver.
func kindOf(ap *tool.Approval) tool.DecisionKind {
	switch {
	case ap == nil:
		return ""
	case ap.Kind != "":
		return ap.Kind
	case strings.HasPrefix(ap.Approver, "rule:"):
		return tool.ApprovedByRule
	case strings.HasPrefix(ap.Approver, "grant:"):
		return tool.ApprovedByGrant
	case strings.HasPrefix(ap.Approver, "policy:"):
		return tool.ApprovedByPolicy
	}
	return tool.ApprovedAtGate
}

// match matches one execution to what let it run. The approvals that count
// for it came after the call's previous round (after) and before it ran
// (before, an event id).
func (a *auditor) match(x *Execution, spec tool.Spec, ap *tool.Approval, after, before int64) {
	if ap != nil {
		x.By = ap.Approver
	}
	x.Kind = kindOf(ap)
	d, err := tool.Digest(x.Tool, x.Args)
	if err != nil {
		x.Problem = fmt.Sprintf("%s %s ran arguments that cannot be digested, so no approval can name them (%v): %s", x.CallID, x.Tool, err, clipArgs(x.Args))
		return
	}
	x.Digest = d
	var basis string
	switch x.Kind {
	case "":
		if spec.Destructive {
			err = errors.New("it ran with no approval: a destructive call runs only approved")
		} else {
			err = fmt.Errorf("it ran with no approval, yet for these arguments the policy decides %s", describeVerdict(a.evaluate(x.Tool, false, x.Args)))
		}
	case tool.ApprovedByRule:
		basis, err = a.matchRule(x, spec, strings.TrimPrefix(ap.Approver, "rule:"))
	case tool.ApprovedByGrant:
		basis, err = a.matchGrant(x, spec, ap)
	case tool.ApprovedByPolicy:
		basis, err = a.matchAutoApprove()
	default:
		basis, err = a.matchHuman(x, spec, after, before)
	}
	if err == nil || x.Unbound {
		if terr := a.traceAgrees(x); terr != nil {
			x.Unbound, err = false, terr
		}
	}
	if err != nil {
		local := ""
		if x.Local {
			local = " (a local activity: its arguments as the trace records them)"
		}
		x.Problem = fmt.Sprintf("%s %s ran %s%s (digest %s), but %v", x.CallID, x.Tool, clipArgs(x.Args), local, clipDigest(x.Digest), err)
		return
	}
	x.Basis = basis
	x.Matched = !x.Unbound
}

// matchRule: a rule let the call run, so the policy's rules, evaluated again
// on what ran as the run's rules version evaluates them, must allow it by
// that rule.
func (a *auditor) matchRule(x *Execution, spec tool.Spec, rule string) (string, error) {
	if err := a.canEvaluate(); err != nil {
		return "", fmt.Errorf("rule %s let it run and %v", rule, err)
	}
	v := a.evaluate(x.Tool, spec.Destructive, x.Args)
	if v.Decide != policy.Allow || v.Rule != rule || rule == "" {
		return "", fmt.Errorf("rule %s, which let it run, does not allow these arguments: the policy decides %s", rule, describeVerdict(v))
	}
	return "rule " + rule + " allows these arguments", nil
}

// matchAutoApprove: the run's always_approve policy let the call run, which
// only a run with no policy, started asking for it, on a worker that allows
// it, does.
func (a *auditor) matchAutoApprove() (string, error) {
	switch {
	case a.pol != nil:
		return "", errors.New("always_approve let it run, and a run under a policy never approves by itself")
	case a.approval != workflows.PolicyAlwaysApprove:
		return "", fmt.Errorf("always_approve let it run, and the run was started with approval %q", a.approval)
	case a.config == nil || !a.config.AllowAutoApprove:
		return "", errors.New("always_approve let it run, and the worker's recorded config does not allow it (no --allow-auto-approve)")
	}
	return "approval always_approve (the run asked for it; the worker allows it)", nil
}

// traceAgrees checks the run's own record of the call, when its trace is in
// the history: the arguments it approved are the ones that ran.
func (a *auditor) traceAgrees(x *Execution) error {
	if a.runRes == nil || x.Local {
		return nil
	}
	var rec *workflows.TraceRecord
	for i := range a.runRes.Trace {
		if r := &a.runRes.Trace[i]; r.CallID == x.CallID && approvedStatus(r.Status) {
			rec = r
		}
	}
	if rec == nil || len(rec.Args) == 0 {
		return nil
	}
	if d, err := tool.Digest(x.Tool, rec.Args); err != nil || d != x.Digest {
		return fmt.Errorf("the run's trace records %s approved (by %s) with other arguments: %s", x.CallID, rec.Approver, clipArgs(rec.Args))
	}
	return nil
}

// localExecutions checks the calls of tools that ran as local activities.
// Their markers do not record their input, so the arguments and the
// approval are the trace's: each record of a run (ok, error, interrupted,
// fallback) after the call's approval, or with none.
func (a *auditor) localExecutions(specs map[string]tool.Spec) {
	markers := map[string]int{}
	for _, l := range a.locals {
		if s, ok := specs[l.tool]; ok && s.Local {
			markers[l.tool]++
		}
	}
	if len(markers) == 0 {
		return
	}
	runs := map[string]int{}
	if a.runRes != nil {
		approvals := map[string]*tool.Approval{} // call id -> its latest approval
		interrupted := map[string]bool{}
		for _, r := range a.runRes.Trace {
			spec, ok := specs[r.Tool]
			if !ok || !spec.Local || r.CallID == "" {
				continue
			}
			switch r.Status {
			case workflows.TraceInterrupted:
				interrupted[r.CallID] = true
			case workflows.TraceApproved, workflows.TraceEdited:
				ap := &tool.Approval{Approver: r.Approver, Kind: tool.ApprovedAtGate}
				if interrupted[r.CallID] {
					ap.Kind = tool.ApprovedInterrupt
				}
				if k := kindOf(&tool.Approval{Approver: r.Approver}); k != tool.ApprovedAtGate {
					ap.Kind = k
				}
				if ap.Kind == tool.ApprovedByGrant {
					ap.Note, _, _ = strings.Cut(strings.TrimPrefix(r.Reason, "grant "), ",")
				}
				approvals[r.CallID] = ap
				continue
			}
			ap := approvals[r.CallID]
			switch r.Status {
			case workflows.TraceOK, workflows.TraceInterrupted, workflows.TraceFallback:
			case workflows.TraceError:
				if ap == nil {
					continue // refused before it ran (a bad call), or not run
				}
			default:
				continue
			}
			runs[r.Tool]++
			if !a.needsDecision(spec, r.Args, ap) {
				continue
			}
			x := Execution{At: r.At, EventID: a.traceAt, CallID: r.CallID, Tool: r.Tool, Local: true, Args: r.Args}
			a.match(&x, spec, ap, 0, a.traceAt)
			if x.Matched {
				x.Basis += " (a local activity: its arguments as the trace records them)"
			}
			a.rep.Executions = append(a.rep.Executions, x)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(markers)) {
		if spec := specs[name]; spec.Destructive && markers[name] > runs[name] {
			a.rep.Executions = append(a.rep.Executions, Execution{EventID: a.traceAt, Tool: name, Local: true, Unbound: true,
				Problem: fmt.Sprintf("%d local activities of destructive tool %s ran and the trace in this history shows %d runs of it: "+
					"a local activity's marker does not record its arguments, so the rest cannot be tied to what let them run (a retried attempt leaves a marker too)",
					markers[name], name, runs[name])})
		}
	}
}

// evaluate applies the policy's rules to a call as the run's rules version
// did: failing closed to the strictest verdict (version 5 and later), or at
// the first rule that cannot be evaluated (older runs).
func (a *auditor) evaluate(toolName string, destructive bool, args []byte) policy.Verdict {
	if a.version < versionTrust2 {
		return a.engine.EvaluateFirstError(toolName, destructive, args, a.reqBy)
	}
	return a.engine.Evaluate(toolName, destructive, args, a.reqBy)
}

// canEvaluate says why the policy's rules cannot be evaluated, if they
// cannot.
func (a *auditor) canEvaluate() error {
	switch {
	case a.pol == nil:
		return errors.New("the history records no policy, and none was given (--policy)")
	case a.engErr != nil:
		return fmt.Errorf("the policy does not compile: %v", a.engErr)
	}
	return nil
}

// describeVerdict says what a verdict decides: "ask by rule large-refunds
// for 2 distinct approvers with role finance".
func describeVerdict(v policy.Verdict) string {
	var s string
	switch v.Decide {
	case policy.Allow:
		s = "allow by rule " + v.Rule
		if v.Rule == "" {
			s = "allow (no rule holds it back)"
		}
	case policy.Deny:
		s = "deny by rule " + v.Rule
	default:
		by := "the tool's default"
		if v.Rule != "" {
			by = "rule " + v.Rule
		}
		s = "ask by " + by + " for " + v.Need.Describe()
	}
	if v.Error != "" {
		s += " (" + v.Error + ")"
	}
	return s
}

// clipArgs is a call's arguments as a message shows them: at most 300 bytes.
func clipArgs(args json.RawMessage) string {
	if len(args) == 0 {
		return "{}"
	}
	if len(args) > 300 {
		return string(args[:300]) + "…"
	}
	return string(args)
}

func names(who []string) string {
	if len(who) == 0 {
		return ""
	}
	return " (" + strings.Join(who, ", ") + ")"
}
