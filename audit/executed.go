package audit

import (
	"encoding/json"
	"errors"
	"fmt"
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

// vote is one approval of a call that counts towards letting it run.
type vote struct {
	by     string
	digest string // the digest of the arguments it approves ("" for none named)
}

// matchHuman: people approved the call. Under a policy, enough distinct
// approvers who may decide it (the quorum the rules ask for what ran, the
// role, never its requester) must have signed verified, applied approvals
// whose digest — or edited_digest, for an edit — is what ran. Without one,
// an applied approval's args_digest must be what ran.
func (a *auditor) matchHuman(x *Execution, spec tool.Spec, after, before int64) (string, error) {
	var votes []vote
	var uncounted []string // under a policy: approvals unsigned or not verifying
	for i, e := range a.rep.Entries {
		p, ok := a.inputs[i]
		if !ok || !p.approve || e.CallID != x.CallID || e.EventID <= after || e.EventID >= before || !e.Applied {
			continue
		}
		if a.pol != nil {
			c, verified := a.claims[i]
			if !verified {
				uncounted = append(uncounted, e.Approver)
				continue
			}
			if !a.kindFits(tool.DecisionKind(c.Kind), x.Kind) {
				continue
			}
			d := c.EditedDigest
			if d == "" {
				d = c.ArgsDigest
			}
			votes = append(votes, vote{by: c.Approver, digest: d})
			continue
		}
		if !a.kindFits(p.in.Kind, x.Kind) {
			continue
		}
		d := p.in.ArgsDigest
		if len(p.in.EditedArgs) > 0 {
			d, _ = tool.Digest(x.Tool, p.in.EditedArgs)
		}
		votes = append(votes, vote{by: e.Approver, digest: d})
	}
	if a.pol == nil {
		return a.matchUnsigned(x, votes)
	}
	if a.engErr != nil {
		return "", fmt.Errorf("the policy does not compile: %v", a.engErr)
	}
	need, why, err := a.needOf(x, spec)
	if err != nil {
		return "", err
	}
	var ok []string
	for _, v := range votes {
		if v.digest == x.Digest && v.by != a.reqBy && a.pol.Eligible(v.by, need) == nil && !slices.Contains(ok, v.by) {
			ok = append(ok, v.by)
		}
	}
	if len(ok) >= need.Count {
		return fmt.Sprintf("approved by %s (needed %s, %s)", strings.Join(ok, ", "), need.Describe(), why), nil
	}
	if a.continued && !signsOther(votes, x.Digest) {
		x.Unbound = true
		return "", fmt.Errorf("it needed %s approving what ran (%s), and this history has %d%s: the run continued its chain, and approvals given in an earlier run of it are in that run's history",
			need.Describe(), why, len(ok), names(ok))
	}
	msg := fmt.Sprintf("it needed %s approving what ran (%s), and has %d%s; %s", need.Describe(), why, len(ok), names(ok), a.approved(x, votes))
	if len(uncounted) > 0 {
		msg += fmt.Sprintf("; not counted, unsigned or not verifying: %s", strings.Join(uncounted, ", "))
	}
	return "", errors.New(msg)
}

// matchUnsigned matches a call of a run without a policy to its applied
// approvals' args_digest.
func (a *auditor) matchUnsigned(x *Execution, votes []vote) (string, error) {
	var undigested []string
	for _, v := range votes {
		if v.digest == x.Digest {
			return fmt.Sprintf("approved by %s (unsigned: the run had no policy), its args_digest what ran", v.by), nil
		}
		if v.digest == "" {
			undigested = append(undigested, v.by)
		}
	}
	if len(votes) == 0 && a.continued {
		x.Unbound = true
		return "", errors.New("no approval of it is in this history: the run continued its chain, and approvals given in an earlier run of it are in that run's history")
	}
	if len(undigested) > 0 && a.version < versionDigest {
		x.Unbound = true
		return "", fmt.Errorf("the approval by %s names no args_digest (runs before rules version %d took decisions without it): what ran cannot be tied to what was approved",
			strings.Join(undigested, ", "), versionDigest)
	}
	return "", errors.New(a.approved(x, votes))
}

// signsOther says whether one of the votes approves arguments other than
// those with digest d.
func signsOther(votes []vote, d string) bool {
	for _, v := range votes {
		if v.digest != d {
			return true
		}
	}
	return false
}

// kindFits says whether a decision of kind got (as its payload or token
// names it; "" is a gate's) answers what let the call run (want). Runs from
// before decisions named their kind are not asked.
func (a *auditor) kindFits(got, want tool.DecisionKind) bool {
	if a.version < versionKind {
		return true
	}
	if got == "" {
		got = tool.ApprovedAtGate
	}
	return got == want
}

// needOf is who had to approve what ran: for the tool's own interrupt, its
// approvers; at the gate, what the rules ask for the arguments that ran
// (an edit allowed by a rule: its editor alone), and from rules version 5
// never fewer approvers than the call as proposed asked for. A deny is
// an error: nothing lets such a call run.
func (a *auditor) needOf(x *Execution, spec tool.Spec) (policy.Approvers, string, error) {
	if x.Kind == tool.ApprovedInterrupt {
		return a.pol.ToolApprovers(x.Tool), "the tool's approvers, for its interrupt", nil
	}
	v := a.evaluate(x.Tool, spec.Destructive, x.Args)
	var need policy.Approvers
	why := "as the tool's default asks"
	switch v.Decide {
	case policy.Deny:
		return need, "", fmt.Errorf("for what ran the policy decides %s: no approval lets such a call run", describeVerdict(v))
	case policy.Allow:
		need, why = policy.Approvers{Count: 1}, "rule "+v.Rule+" allows what ran, so its editor's approval"
	default:
		need = v.Need
		if v.Rule != "" {
			why = "as rule " + v.Rule + " asks"
		}
		if v.Error != "" {
			why = "failing closed: " + v.Error
		}
	}
	if orig := a.originalArgs(x.CallID); orig != nil && a.version >= versionTrust2 {
		if pv := a.evaluate(x.Tool, spec.Destructive, orig); pv.Decide == policy.Ask && pv.Need.Count > need.Count {
			need.Count = pv.Need.Count
			why += fmt.Sprintf("; %d as the call was proposed, before its edit", pv.Need.Count)
		}
	}
	need.Count = max(need.Count, 1)
	return need, why, nil
}

// approved says what was approved for a call: each approval and the
// digest it signs (with the arguments the trace shows for it, if any).
func (a *auditor) approved(x *Execution, votes []vote) string {
	if len(votes) == 0 {
		return "what was approved: no applied approval of " + x.CallID + " in this history came before it ran"
	}
	var parts []string
	for _, v := range votes {
		what := "no args_digest"
		if v.digest != "" {
			what = "digest " + clipDigest(v.digest)
			if args := a.argsWithDigest(x, v.digest); args != nil {
				what += " = " + clipArgs(args)
			}
		}
		parts = append(parts, v.by+" approved "+what)
	}
	return "what was approved: " + strings.Join(parts, "; ")
}

// argsWithDigest finds the arguments of a call with digest d in the trace.
func (a *auditor) argsWithDigest(x *Execution, d string) json.RawMessage {
	if a.runRes == nil {
		return nil
	}
	for _, r := range a.runRes.Trace {
		if r.CallID != x.CallID {
			continue
		}
		for _, args := range []json.RawMessage{r.Args, r.OriginalArgs} {
			if got, err := tool.Digest(x.Tool, args); err == nil && len(args) > 0 && got == d {
				return args
			}
		}
	}
	return nil
}

// originalArgs are a call's arguments as proposed, when an approver edited
// them (the trace keeps them); nil otherwise or without a trace.
func (a *auditor) originalArgs(callID string) json.RawMessage {
	if a.runRes == nil {
		return nil
	}
	for _, r := range a.runRes.Trace {
		if r.CallID == callID && r.Status == workflows.TraceApproved && len(r.OriginalArgs) > 0 {
			return r.OriginalArgs
		}
	}
	return nil
}

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
	case by == a.reqBy && by != "":
		return "", fmt.Errorf("grant %s is by %s, who requested the run and may let none of its calls through", id, by)
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

// traceAgrees checks the run's own record of the call, when its trace is in
// the history: the arguments it approved are the ones that ran.
func (a *auditor) traceAgrees(x *Execution) error {
	if a.runRes == nil || x.Local {
		return nil
	}
	var rec *workflows.TraceRecord
	for i := range a.runRes.Trace {
		if r := &a.runRes.Trace[i]; r.CallID == x.CallID && r.Status == workflows.TraceApproved {
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
			case workflows.TraceApproved:
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
	for _, name := range sortedKeys(markers) {
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

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
