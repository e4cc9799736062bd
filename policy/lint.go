package policy

import (
	"fmt"

	"github.com/toolgate/toolgate/internal/sorted"
)

// Warnings lists what in a valid policy is probably not what its author
// meant, one sentence each, tools in name order: a deny rule that comes
// after an allow rule of the same tool. Rules are tried in order and the
// first that holds decides, so a call both rules match is allowed and the
// deny never applies to it (the allow shadows it). Shadow rules decide
// nothing and are left out. The policy is still valid: the CLI prints each
// warning on stderr wherever it loads a policy ("policy: warning: …").
func (p *Policy) Warnings() []string {
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
