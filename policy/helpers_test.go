package policy

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolgate/toolgate/signed"
)

// testKey is a real ed25519 public key in text form, fixed by seed.
func testKey(seed byte) string {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	return signed.FormatPublicKey(priv.Public().(ed25519.PublicKey))
}

// examplePolicy is the policy of the package's documentation.
func examplePolicy() string {
	return fmt.Sprintf(`
approvers:
  alice: {key: %q, roles: [support]}
  bob:   {key: %q, roles: [finance]}
  carol: {key: %q, roles: [finance]}
tools:
  close_ticket:
    approvers: {roles: [support]}
  refund:
    rules:                       # first match wins
      - {id: small-refunds, when: "args.amount_cents <= 5000", decide: allow}
      - {id: large-refunds, when: "args.amount_cents > 50000", decide: ask, approvers: {roles: [finance], count: 2}}
      - {id: no-test-refunds, when: "has(args.reason) && args.reason.contains('test')", decide: deny}
    approvers: {roles: [finance]}  # for an "ask" with no approvers of its own
`, testKey(1), testKey(2), testKey(3))
}

// richPolicy adds shadow rules, fail-closed cases and requested_by.
func richPolicy() string {
	return examplePolicy() + `
  export:
    rules:
      - {id: export-shadow, when: "size(args.rows) > 100", decide: deny, shadow: true}
      - {id: export-broken-shadow, when: "args.nope == 1", decide: deny, shadow: true}
      - {id: export-self, when: "requested_by == 'alice'", decide: allow}
      - {id: export-deny-missing, when: "args.region != 'eu'", decide: deny}
      - {id: export-ask, when: "true", decide: ask}
  wire:
    rules:
      - {id: wire-big, when: "args.amount > 100", decide: ask, approvers: {roles: [finance], count: 2}}
  search: {}
`
}

func mustCompile(t *testing.T, src string) *Engine {
	t.Helper()
	p, err := Parse([]byte(src))
	require.NoError(t, err)
	e, err := Compile(p)
	require.NoError(t, err)
	return e
}
