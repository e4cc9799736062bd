package policy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/sorted"
	"github.com/toolgate/toolgate/signed"
)

// Bounds on a policy's size.
const (
	MaxApprovers    = 256 // approvers in a policy
	MaxTools        = 256 // tools in a policy
	MaxRulesPerTool = 64  // rules of one tool
	MaxRoles        = 64  // roles in one list
)

// nameRE is the form of approver names, roles and rule ids.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// Validate checks a policy: every approver's name, key and roles; every
// tool's rules (ids unique within the policy, decide allow|ask|deny, a when
// that compiles to bool) and approvers blocks (roles held by some approver,
// a count that a quorum can meet); and the bounds on sizes. Each error names
// its place, e.g. `tools.refund.rules[1].when: ...`; all errors are
// reported, in a fixed order.
func (p *Policy) Validate() error {
	if p == nil {
		return errors.New("policy: nil")
	}
	var errs []error
	fail := func(place, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", place, fmt.Sprintf(format, a...)))
	}

	switch n := len(p.Approvers); {
	case n == 0:
		fail("approvers", "none declared; a policy needs at least one approver")
	case n > MaxApprovers:
		fail("approvers", "%d declared, at most %d", n, MaxApprovers)
	}
	keyOwner := map[string]string{}
	for _, name := range sorted.Keys(p.Approvers) {
		a := p.Approvers[name]
		place := "approvers." + name
		if !nameRE.MatchString(name) {
			fail(place, "name %q must match %s", name, nameRE)
		}
		if pub, err := signed.ParsePublicKey(a.Key); err != nil {
			fail(place+".key", "%v", err)
		} else if other, dup := keyOwner[string(pub)]; dup {
			fail(place+".key", "the same key as approver %s; each approver needs their own key", other)
		} else {
			keyOwner[string(pub)] = name
		}
		checkRoles(place+".roles", a.Roles, fail)
		p.checkReach(place, a, fail)
	}
	if p.ViaKey != "" {
		if pub, err := signed.ParsePublicKey(p.ViaKey); err != nil {
			fail("via_key", "%v", err)
		} else if other, dup := keyOwner[string(pub)]; dup {
			fail("via_key", "the same key as approver %s; the listener that signs decisions by link needs a key of its own (toolgate keys new via)", other)
		}
	}

	if p.MaxTokenLifetime != "" {
		if d, err := time.ParseDuration(p.MaxTokenLifetime); err != nil || d <= 0 || d > signed.MaxLifetime {
			fail("max_token_lifetime", "%q: want a duration such as \"15m\", more than 0 and at most %s", p.MaxTokenLifetime, signed.MaxLifetime)
		}
	}
	checkRoles("operators", p.Operators, fail)
	for i, role := range p.Operators {
		if nameRE.MatchString(role) && len(p.holders([]string{role})) == 0 {
			fail(fmt.Sprintf("operators[%d]", i), "no approver holds role %q", role)
		}
	}
	if n := len(p.Tools); n > MaxTools {
		fail("tools", "%d declared, at most %d", n, MaxTools)
	}
	ruleAt := map[string]string{}
	for _, name := range sorted.Keys(p.Tools) {
		t := p.Tools[name]
		place := "tools." + name
		if strings.TrimSpace(name) == "" {
			place = fmt.Sprintf("tools.%q", name)
			fail(place, "a tool name must not be empty")
		}
		if t.Approvers != nil {
			p.checkApprovers(place+".approvers", *t.Approvers, fail)
		}
		if n := len(t.Rules); n > MaxRulesPerTool {
			fail(place+".rules", "%d rules, at most %d", n, MaxRulesPerTool)
		}
		for i, r := range t.Rules {
			rp := fmt.Sprintf("%s.rules[%d]", place, i)
			switch {
			case r.ID == "":
				fail(rp+".id", "missing; every rule needs an id (the verdict names it)")
			case !nameRE.MatchString(r.ID):
				fail(rp+".id", "%q must match %s", r.ID, nameRE)
			case ruleAt[r.ID] != "":
				fail(rp+".id", "%q is also the id of %s; rule ids are unique within the policy", r.ID, ruleAt[r.ID])
			default:
				ruleAt[r.ID] = rp
			}
			switch r.Decide {
			case Allow, Ask, Deny:
			case "":
				fail(rp+".decide", "missing; want allow, ask or deny")
			default:
				fail(rp+".decide", "%q, want allow, ask or deny", r.Decide)
			}
			if r.When == "" {
				fail(rp+".when", "missing; a rule needs a condition (\"true\" for every call)")
			} else if _, err := compileCEL(r.When); err != nil {
				fail(rp+".when", "%v", err)
			}
			if r.Approvers != nil {
				if r.Decide != Ask {
					fail(rp+".approvers", "only a rule that decides ask names approvers (this one decides %s)", r.Decide)
				}
				p.checkApprovers(rp+".approvers", *r.Approvers, fail)
			}
		}
	}
	p.validateGuards(fail)
	return errors.Join(errs...)
}

// checkRoles checks a list of roles' names and length.
func checkRoles(place string, roles []string, fail func(place, format string, a ...any)) {
	if len(roles) > MaxRoles {
		fail(place, "%d roles, at most %d", len(roles), MaxRoles)
	}
	for i, r := range roles {
		if !nameRE.MatchString(r) {
			fail(fmt.Sprintf("%s[%d]", place, i), "role %q must match %s", r, nameRE)
		}
	}
}

// checkApprovers checks an approvers block against the policy's approvers.
func (p *Policy) checkApprovers(place string, need Approvers, fail func(place, format string, a ...any)) {
	checkRoles(place+".roles", need.Roles, fail)
	for i, role := range need.Roles {
		if nameRE.MatchString(role) && len(p.holders([]string{role})) == 0 {
			fail(fmt.Sprintf("%s.roles[%d]", place, i), "no approver holds role %q", role)
		}
	}
	holders := p.holders(need.Roles)
	switch {
	case need.Count < 0:
		fail(place+".count", "%d; want 1 or more (0 means 1)", need.Count)
	case need.Count > len(holders) && len(holders) > 0:
		fail(place+".count", "%d approvals needed but only %d approvers %s; no quorum could ever be met",
			need.Count, len(holders), holdersPhrase(need.Roles))
	}
}

func holdersPhrase(roles []string) string {
	if len(roles) == 0 {
		return "are declared"
	}
	return fmt.Sprintf("hold one of %v", roles)
}

// holders lists, sorted, the approvers holding one of roles (all approvers
// when roles is empty).
func (p *Policy) holders(roles []string) []string {
	var out []string
	for _, name := range sorted.Keys(p.Approvers) {
		if len(roles) == 0 || hasAny(p.Approvers[name].Roles, roles) {
			out = append(out, name)
		}
	}
	return out
}

func hasAny(held, wanted []string) bool {
	for _, r := range wanted {
		if slices.Contains(held, r) {
			return true
		}
	}
	return false
}

// CheckTools reports the tools the policy names that are not among the
// worker's registered tools: a typo must stop the worker at start, not leave
// a tool silently ungoverned.
func (p *Policy) CheckTools(registered []string) error {
	var unknown []string
	for _, name := range sorted.Keys(p.Tools) {
		if !slices.Contains(registered, name) {
			unknown = append(unknown, name)
		}
	}
	for _, name := range p.guardTools() {
		if !slices.Contains(registered, name) && !slices.Contains(unknown, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	known := slices.Clone(registered)
	slices.Sort(known)
	return fmt.Errorf("policy names tools this worker does not register: %s (registered: %s)",
		strings.Join(quoteAll(unknown), ", "), strings.Join(quoteAll(known), ", "))
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

// checkReach checks where an approver is reached (slack, email) and the
// channels they may decide through (via): each needs its address, and any
// needs the policy's via_key, which signs those decisions.
func (p *Policy) checkReach(place string, a Approver, fail func(place, format string, a ...any)) {
	if a.Slack != "" && !slackIDRE.MatchString(a.Slack) {
		fail(place+".slack", "%q is not a Slack user id (U or W and 2-20 capitals and digits)", a.Slack)
	}
	if a.Email != "" && !emailRE.MatchString(a.Email) {
		fail(place+".email", "%q: want a bare address (alice@example.com)", a.Email)
	}
	for i, ch := range a.Via {
		at := fmt.Sprintf("%s.via[%d]", place, i)
		switch {
		case ch != ViaSlack && ch != ViaEmail:
			fail(at, "%q: want slack or email", ch)
		case slices.Index(a.Via, ch) != i:
			fail(at, "%q given twice", ch)
		case ch == ViaSlack && a.Slack == "":
			fail(at, "slack needs the approver's Slack user id (slack: U…)")
		case ch == ViaEmail && a.Email == "":
			fail(at, "email needs the approver's address (email: …)")
		case p.ViaKey == "":
			fail(at, "deciding by link needs the policy's via_key: the public key of the inbox listener's --via-key, which signs those decisions")
		}
	}
}

var slackIDRE = regexp.MustCompile(`^[UW][A-Z0-9]{2,20}$`)

// emailRE is a bare address (no display name, no comment): what the worker's
// runs check their policy with must be deterministic, as net/mail is not
// known to be (workflowcheck).
var emailRE = regexp.MustCompile("^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$")
