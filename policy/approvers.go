package policy

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/toolgate/toolgate/internal/sorted"

	"github.com/toolgate/toolgate/signed"
)

// Key returns the approver's public key; false if name is not an approver
// or their key does not parse (Validate refuses such a policy).
func (p *Policy) Key(name string) (ed25519.PublicKey, bool) {
	a, ok := p.Approvers[name]
	if !ok {
		return nil, false
	}
	pub, err := signed.ParsePublicKey(a.Key)
	if err != nil {
		return nil, false
	}
	return pub, true
}

// Roles returns a copy of the approver's roles; nil if name is not an
// approver (an approver with no roles gets an empty, non-nil slice).
func (p *Policy) Roles(name string) []string {
	a, ok := p.Approvers[name]
	if !ok {
		return nil
	}
	return append([]string{}, a.Roles...)
}

// Eligible says why name may not decide a call that needs need, or returns
// nil when they may: name must be an approver of the policy and, when
// need.Roles is not empty, hold one of those roles.
func (p *Policy) Eligible(name string, need Approvers) error {
	a, ok := p.Approvers[name]
	if !ok {
		return fmt.Errorf("%q is not an approver of this worker's policy", name)
	}
	if len(need.Roles) == 0 || hasAny(a.Roles, need.Roles) {
		return nil
	}
	if len(a.Roles) == 0 {
		return fmt.Errorf("%s holds no role; this call needs one of %v", name, need.Roles)
	}
	return fmt.Errorf("%s holds %v; this call needs one of %v", name, a.Roles, need.Roles)
}

// Operator says why name may not rewind or fork a run under this policy,
// or returns nil when they may: they must hold one of the roles operators
// names.
func (p *Policy) Operator(name string) error {
	a, ok := p.Approvers[name]
	switch {
	case !ok:
		return fmt.Errorf("%q is not an approver of this worker's policy", name)
	case len(p.Operators) == 0:
		return fmt.Errorf("this worker's policy names no operators (operators: [ROLE, …]), so nobody may rewind or fork a run under it")
	case hasAny(a.Roles, p.Operators):
		return nil
	case len(a.Roles) == 0:
		return fmt.Errorf("%s holds no role; rewinding or forking a run needs one of the operators' roles %v", name, p.Operators)
	}
	return fmt.Errorf("%s holds %v; rewinding or forking a run needs one of the operators' roles %v", name, a.Roles, p.Operators)
}

// ShareRole reports whether approvers a and b hold a role in common.
func (p *Policy) ShareRole(a, b string) bool {
	x, okA := p.Approvers[a]
	y, okB := p.Approvers[b]
	return okA && okB && hasAny(x.Roles, y.Roles)
}

// ToolApprovers returns the tool's own approvers block (Count at least 1),
// or Approvers{Count: 1} (any approver) when it declares none.
func (p *Policy) ToolApprovers(tool string) Approvers {
	t, ok := p.Tools[tool]
	if !ok || t.Approvers == nil {
		return Approvers{Count: 1}
	}
	return t.Approvers.normalized()
}

// TokenLifetime is the longest a token may be valid under this policy
// (exp - iat): max_token_lifetime, else signed.MaxLifetime.
func (p *Policy) TokenLifetime() time.Duration {
	if d, err := time.ParseDuration(p.MaxTokenLifetime); err == nil && d > 0 && d < signed.MaxLifetime {
		return d
	}
	return signed.MaxLifetime
}

// Channels a decision by link comes through (Approver.Via).
const (
	ViaSlack = "slack"
	ViaEmail = "email"
)

// DecidesVia says why name may not decide by a click that came through
// channel, or returns nil when they may: they are an approver whose via
// names it, and the policy has a via_key.
func (p *Policy) DecidesVia(name, channel string) error {
	a, ok := p.Approvers[name]
	switch {
	case !ok:
		return fmt.Errorf("%q is not an approver of this worker's policy", name)
	case p.ViaKey == "":
		return errors.New("this worker's policy has no via_key, so no decision by link counts: sign it with your key")
	case !slices.Contains(a.Via, channel):
		return fmt.Errorf("%s may not decide through %s (their via is %v): sign the decision with your key", name, channel, a.Via)
	}
	return nil
}

// ViaPublicKey is the public key that signs decisions by link (via_key);
// false if none.
func (p *Policy) ViaPublicKey() (ed25519.PublicKey, bool) {
	if p.ViaKey == "" {
		return nil, false
	}
	pub, err := signed.ParsePublicKey(p.ViaKey)
	return pub, err == nil
}

// BySlack returns the approver whose Slack user id is id.
func (p *Policy) BySlack(id string) (string, bool) {
	for _, name := range sorted.Keys(p.Approvers) {
		if id != "" && p.Approvers[name].Slack == id {
			return name, true
		}
	}
	return "", false
}

// Names are the approvers' names, sorted.
func (p *Policy) Names() []string { return sorted.Keys(p.Approvers) }

// Approver returns the approver named name.
func (p *Policy) Approver(name string) (Approver, bool) {
	a, ok := p.Approvers[name]
	return a, ok
}
