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
  carol: {key: "", roles: [finance]}
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
  carol: {key: "", roles: [finance]}
tools:
  refund:
    rules:
      - {id: first-ask, when: "args.amount_cents > 20000", decide: ask}
      - {id: no-test-refunds, when: "has(args.reason) && args.reason.contains('test')", decide: deny}
      - {id: small-refunds, when: "args.amount_cents <= 5000", decide: allow}
`)
	assert.Empty(t, p.Warnings())
}

// A quorum that needs every approver who may give it can never be met in a
// run one of them requested or forked (self-approval is refused): a warning
// names its place, the approvers and what to change, for a tool's, a rule's
// and a guard's block, and for a policy of one approver. A quorum one short
// of its holders, or a rule's approvers under allow, is no warning.
func TestWarnQuorumThatNeedsEveryHolder(t *testing.T) {
	p := parseWithKeys(t, `
approvers:
  alice: {key: "", roles: [support]}
  bob: {key: "", roles: [finance]}
  carol: {key: "", roles: [finance]}
tools:
  close_ticket:
    approvers: {roles: [support]}
  refund:
    rules:
      - {id: mid-refunds, when: "args.amount_cents > 5000", decide: ask, approvers: {roles: [finance]}}
      - {id: large-refunds, when: "args.amount_cents > 20000", decide: ask, approvers: {roles: [finance], count: 2}}
    approvers: {roles: [finance, support], count: 2}
  wire:
    approvers: {count: 3}
guards:
  - {id: daily, kind: budget, tools: [refund], amount: "args.amount_cents", limit: 100000, window: 24h, exceed: ask, approvers: {roles: [finance], count: 2}}
`)
	assert.Equal(t, []string{
		"tools.close_ticket.approvers: 1 approval needed and only 1 approver holds one of [support] (alice): " +
			"a run alice requests or forks can never get it, since self-approval is refused; give another approver one of [support]",
		"tools.refund.rules[1].approvers (rule large-refunds): 2 approvals needed and only 2 approvers hold one of [finance] (bob, carol): " +
			"a run one of them requests or forks can never get them, since self-approval is refused; give another approver one of [finance], or lower count",
		"tools.wire.approvers: 3 approvals needed and only 3 approvers are declared (alice, bob, carol): " +
			"a run one of them requests or forks can never get them, since self-approval is refused; declare another approver, or lower count",
		"guards[0].approvers (guard daily): 2 approvals needed and only 2 approvers hold one of [finance] (bob, carol): " +
			"a run one of them requests or forks can never get them, since self-approval is refused; give another approver one of [finance], or lower count",
	}, p.Warnings())

	one := parseWithKeys(t, `
approvers:
  bob: {key: "", roles: [finance]}
tools:
  refund:
    approvers: {roles: [finance]}
`)
	assert.Equal(t, []string{"approvers: only bob is declared: a run bob requests or forks can never be approved, " +
		"since self-approval is refused; declare a second approver"}, one.Warnings())
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
