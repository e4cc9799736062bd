package ledger

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
)

// t0 is the ledger's clock at the start of each test.
var t0 = time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)

// keys are the test approvers' keys: alice and bob are operators (role
// ops), carol is not.
type keys map[string]ed25519.PrivateKey

func newKeys(t *testing.T) keys {
	k := keys{}
	for _, name := range []string{"alice", "bob", "carol"} {
		_, priv, err := signed.GenerateKey()
		require.NoError(t, err)
		k[name] = priv
	}
	return k
}

func (k keys) pub(name string) string {
	return signed.FormatPublicKey(k[name].Public().(ed25519.PublicKey))
}

// testPolicy is a policy with the given guards (YAML, indented under
// guards:), alice and bob operators, carol finance.
func testPolicy(t *testing.T, k keys, guards string) *policy.Policy {
	t.Helper()
	src := fmt.Sprintf(`
approvers:
  alice: {key: %q, roles: [ops]}
  bob:   {key: %q, roles: [ops, finance]}
  carol: {key: %q, roles: [finance]}
operators: [ops]
tools:
  refund:
    approvers: {roles: [finance], count: 2}
`, k.pub("alice"), k.pub("bob"), k.pub("carol"))
	if guards != "" {
		src += "guards:\n" + guards
	}
	p, err := policy.Parse([]byte(src))
	require.NoError(t, err)
	return p
}

// newBook is an empty book under the guards (none: "" still compiles a
// policy; use a nil engine for no policy).
func newBook(t *testing.T, guards string) *book {
	t.Helper()
	eng, err := policy.Compile(testPolicy(t, newKeys(t), guards))
	require.NoError(t, err)
	return &book{st: &State{}, eng: eng}
}

// res is a destructive call of tool with args, keyed key, proposed at the
// gate; its digest is that of tool and args.
func res(key, tool, args string) Reservation {
	sum := sha256.Sum256([]byte(tool + "\x00" + args))
	return Reservation{Key: key, Workflow: "run-1", CallID: "c-" + key, Tool: tool, Destructive: true,
		Args: []byte(args), Digest: "sha256:" + hex.EncodeToString(sum[:]), Stage: StageGate}
}

// refund is a refund of cents, keyed key.
func refund(key string, cents int) Reservation {
	return res(key, "refund", fmt.Sprintf(`{"amount_cents":%d}`, cents))
}
