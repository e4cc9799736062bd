package policy

import (
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/internal/sorted"
	"github.com/toolgate/toolgate/internal/text"
)

// Warnings lists what in a valid policy is probably not what its author
// meant, one sentence each, tools in name order:
//
//   - a deny rule that comes after an allow rule of the same tool. Rules are
//     tried in order and the first that holds decides, so a call both rules
//     match is allowed and the deny never applies to it (the allow shadows
//     it). Shadow rules decide nothing and are left out.
//   - a quorum that needs every approver who may give it (quorumWarnings):
//     a run one of them requested or forked can never meet it, since
//     self-approval is refused.
//
// The policy is still valid: the CLI prints each warning on stderr wherever
// it loads a policy ("policy: warning: …").
func (p *Policy) Warnings() []string {
	out := p.shadowWarnings()
	return append(out, p.quorumWarnings()...)
}

func (p *Policy) shadowWarnings() []string {
	var out []string
	for _, name := range sorted.Keys(p.Tools) {
		rules := p.Tools[name].Rules
		for j, deny := range rules {
			if deny.Shadow || deny.Decide != Deny {
				continue
			}
			for i, allow := range rules[:j] {
				if allow.Shadow || allow.Decide != Allow {
					continue
				}
				out = append(out, fmt.Sprintf("tool %s: deny rule %s (tools.%s.rules[%d]) comes after allow rule %s (rules[%d]): "+
					"a call both match is allowed, so %s never denies it (%s shadows it); put %s first",
					name, deny.ID, name, j, allow.ID, i, deny.ID, allow.ID, deny.ID))
				break // one warning per deny rule: the first allow that shadows it
			}
		}
	}
	return out
}

// quorumWarnings names each approvers block (a tool's, a rule's, a guard's)
// whose count equals the approvers who may give it, and a policy of one
// approver (every block without roles falls to them): a run requested (a
// signed start) or forked by one of those approvers can never be approved,
// since self-approval is refused. Count above the holders is an error
// (Validate); this is the case one short of it.
func (p *Policy) quorumWarnings() []string {
	if len(p.Approvers) == 1 {
		name := sorted.Keys(p.Approvers)[0]
		return []string{fmt.Sprintf("approvers: only %s is declared: a run %s requests or forks can never be approved, "+
			"since self-approval is refused; declare a second approver", name, name)}
	}
	var out []string
	check := func(place, what string, need Approvers) {
		holders := p.holders(need.Roles)
		n := max(need.Count, 1)
		if n != len(holders) {
			return
		}
		who, fix := fmt.Sprintf("hold one of %v", need.Roles), fmt.Sprintf("give another approver one of %v", need.Roles)
		switch {
		case len(need.Roles) == 0 && n == 1:
			who, fix = "is declared", "declare another approver"
		case len(need.Roles) == 0:
			who, fix = "are declared", "declare another approver"
		case n == 1:
			who = fmt.Sprintf("holds one of %v", need.Roles)
		}
		them, it := "one of them", "them"
		if n == 1 {
			them, it = holders[0], "it"
		} else {
			fix += ", or lower count"
		}
		out = append(out, fmt.Sprintf("%s%s: %s needed and only %s %s (%s): "+
			"a run %s requests or forks can never get %s, since self-approval is refused; %s",
			place, what, text.Count(n, "approval"), text.Count(n, "approver"), who, strings.Join(holders, ", "), them, it, fix))
	}
	for _, name := range sorted.Keys(p.Tools) {
		t := p.Tools[name]
		if t.Approvers != nil {
			check("tools."+name+".approvers", "", *t.Approvers)
		}
		for i, r := range t.Rules {
			if r.Approvers != nil && r.Decide == Ask {
				check(fmt.Sprintf("tools.%s.rules[%d].approvers", name, i), " (rule "+r.ID+")", *r.Approvers)
			}
		}
	}
	for i, g := range p.Guards {
		if g.Approvers != nil {
			check(fmt.Sprintf("guards[%d].approvers", i), " (guard "+g.ID+")", *g.Approvers)
		}
	}
	return out
}
