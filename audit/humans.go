package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// This file ties an executed call to the people who approved it.

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
		if v.digest == x.Digest && !a.barred(v.by) && a.pol.Eligible(v.by, need) == nil && !slices.Contains(ok, v.by) {
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
		if r.CallID == callID && approvedStatus(r.Status) && len(r.OriginalArgs) > 0 {
			return r.OriginalArgs
		}
	}
	return nil
}

// approvedStatus: a trace record of a call a human (or the run) said yes to,
// with its own arguments (approved) or edited ones (edited, rules version 6).
func approvedStatus(status string) bool {
	return status == workflows.TraceApproved || status == workflows.TraceEdited
}
