package policy_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
)

// parseWithKeys parses a policy whose approvers leave key empty (as
// examples/policy.yaml does), giving each a fresh key.
func parseWithKeys(t *testing.T, src string) *policy.Policy {
	t.Helper()
	for strings.Contains(src, `key: ""`) {
		pub, _, err := signed.GenerateKey()
		require.NoError(t, err)
		src = strings.Replace(src, `key: ""`, fmt.Sprintf("key: %q", signed.FormatPublicKey(pub)), 1)
	}
	p, err := policy.Parse([]byte(src))
	require.NoError(t, err)
	return p
}

const warnPolicy = `
approvers:
  bob: {key: "", roles: [finance]}
tools:
  refund:
    rules:
      - {id: mid-shadow, when: "args.amount_cents > 8000", decide: allow, shadow: true}
      - {id: small-refunds, when: "args.amount_cents <= 5000", decide: allow}
      - {id: large-refunds, when: "args.amount_cents > 20000", decide: ask}
      - {id: no-test-refunds, when: "has(args.reason) && args.reason.contains('test')", decide: deny}
      - {id: also-allow, when: "true", decide: allow}
      - {id: shadow-deny, when: "true", decide: deny, shadow: true}
  wire:
    rules:
      - {id: no-weekend, when: "args.day == 'sun'", decide: deny}
      - {id: small-wires, when: "args.amount < 100", decide: allow}
`

// A deny rule after an allow rule of the same tool is shadowed by it: one
// warning naming the tool and both rules. A deny before every allow, a
// shadow allow (it decides nothing) and a shadow deny (never enforced) are
// no warning.
func TestWarnDenyShadowedByAllow(t *testing.T) {
	p := parseWithKeys(t, warnPolicy)
	assert.Equal(t, []string{
		"tool refund: deny rule no-test-refunds (tools.refund.rules[3]) comes after allow rule small-refunds (rules[1]): " +
			"a call both match is allowed, so no-test-refunds never denies it (small-refunds shadows it); put no-test-refunds first",
	}, p.Warnings())

	// and the shadowing is real: a test refund under 5,000 is allowed
	v := mustEngine(t, p).Evaluate("refund", true, []byte(`{"booking_id":"BK-1","amount_cents":3000,"reason":"a test"}`), "")
	assert.Equal(t, policy.Allow, v.Decide)
	assert.Equal(t, "small-refunds", v.Rule)
}

func TestWarnNoneWithoutAllowBeforeDeny(t *testing.T) {
	p := parseWithKeys(t, `
approvers:
  bob: {key: "", roles: [finance]}
tools:
  refund:
    rules:
      - {id: first-ask, when: "args.amount_cents > 20000", decide: ask}
      - {id: no-test-refunds, when: "has(args.reason) && args.reason.contains('test')", decide: deny}
      - {id: small-refunds, when: "args.amount_cents <= 5000", decide: allow}
`)
	assert.Empty(t, p.Warnings())
}

func mustEngine(t *testing.T, p *policy.Policy) *policy.Engine {
	t.Helper()
	e, err := policy.Compile(p)
	require.NoError(t, err)
	return e
}

// examples/policy.yaml says a test refund is denied: it has no shadowed
// deny, and a test refund under 5,000 is denied by no-test-refunds while
// a small refund that is no test is still allowed.
func TestWarnExamplePolicy(t *testing.T) {
	src, err := os.ReadFile("../examples/policy.yaml")
	require.NoError(t, err)
	p := parseWithKeys(t, string(src))
	assert.Empty(t, p.Warnings())

	e := mustEngine(t, p)
	v := e.Evaluate("refund", true, []byte(`{"booking_id":"BK-1","amount_cents":3000,"reason":"test refund"}`), "")
	assert.Equal(t, policy.Deny, v.Decide, "a test refund under 5,000: %+v", v)
	assert.Equal(t, "no-test-refunds", v.Rule)

	v = e.Evaluate("refund", true, []byte(`{"booking_id":"BK-1","amount_cents":3000,"reason":"late check-in"}`), "")
	assert.Equal(t, policy.Allow, v.Decide, "%+v", v)
	assert.Equal(t, "small-refunds", v.Rule)
}
