package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/testsuite/testenv"
)

// Signed decisions and grants of one signer in the same second are each a
// token of its own (a random jti): approving two calls of a run at once, or
// granting twice in a row, all succeed; approving one call twice says that
// the signer approved it already, and a call decided says who decided it —
// never "token taken already".
func TestSignedActsInTheSameSecond(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	dir := t.TempDir()
	lines := map[string]string{}
	for _, name := range []string{"alice", "bob", "dave"} {
		lines[name] = newCLIKey(t, dir, name)
	}
	pol := writeFile(t, dir, "policy.yaml", fmt.Sprintf(`require_signed_start: true
approvers:
  alice: {key: %q, roles: [support]}
  bob:   {key: %q, roles: [support]}
  dave:  {key: %q, roles: [requesters]}
tools:
  close_ticket: {approvers: {roles: [support], count: 2}}
`, lines["alice"], lines["bob"], lines["dave"]))
	s.startWorkerProc("worker", nil, "--policy", pol)
	key := func(name string) string { return filepath.Join(dir, name+".key") }
	cli := cliAt(t, s.server.Address())

	plan := writeFile(t, dir, "close.json", `{"goal":"close both","planner":{"kind":"scripted","answer":"closed",
  "turns":[[{"tool":"close_ticket","args":{"ticket_id":"TKT-1"}},{"tool":"close_ticket","args":{"ticket_id":"TKT-2"}}]]}}`)
	const id = "same-second"
	if out := cli(0, "run", "--id", id, "--plan", plan, "--as", "dave", "--key", key("dave")); !strings.Contains(out, "started "+id+" (run ") {
		t.Errorf("toolgate run of a signed start:\n%s", out)
	}
	testenv.Eventually(t, waitTimeout, id+" waits for c-1 and c-2", func() error {
		if st, err := s.state(id); err != nil || len(st.Interrupts) != 2 {
			return fmt.Errorf("state %+v, %v", st, err)
		}
		return nil
	})
	alice := []string{"--as", "alice", "--key", key("alice")}
	// Two calls, one signer, one second: two tokens, both taken.
	out := cli(0, append([]string{"approve", id, "c-1", "c-2"}, alice...)...)
	for _, call := range []string{"c-1", "c-2"} {
		if !strings.Contains(out, "counted "+call+" (close_ticket) by alice: 1 of 2 approvals") {
			t.Errorf("alice's approval of %s in the same second as the other's:\n%s", call, out)
		}
	}
	// One call twice: alice approved it already — not a token taken.
	out = cli(1, append([]string{"approve", id, "c-1"}, alice...)...)
	if !strings.Contains(out, "alice has already approved call c-1 (1 of 2 approvals)") || strings.Contains(out, "token") {
		t.Errorf("alice's second approval of c-1:\n%s", out)
	}
	// Two grants in a row, the same second: two tokens, both taken.
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	priv, err := signed.ReadPrivateKey(key("alice"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := s.tg.Grant(ctx, id, "alice", priv, signed.Grant{Tool: "search_tickets", Uses: 1}); err != nil {
			t.Errorf("grant %d of alice's two in a row: %v", i+1, err)
		}
	}
	// bob completes c-1's quorum; then c-1 was decided, and says by whom.
	if out := cli(0, "approve", id, "c-1", "--as", "bob", "--key", key("bob")); !strings.Contains(out, "approved c-1 (close_ticket) by bob") {
		t.Errorf("bob's approval of c-1:\n%s", out)
	}
	out = cli(1, "approve", id, "c-1", "--as", "bob", "--key", key("bob"))
	t.Logf("toolgate approve %s c-1 once decided: %s", id, out)
	if !strings.Contains(out, "c-1 (close_ticket) was decided already by ") || !strings.Contains(out, "(approved): nothing more to do") {
		t.Errorf("an approval of c-1 once it was decided, want who decided it:\n%s", out)
	}
}
