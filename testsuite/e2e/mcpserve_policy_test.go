package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Under a policy, an MCP client's token name is its run's verified
// requester: the server signs the run's start with the key the token file
// names, so the policy's self-approval rule holds the caller (alice may
// not approve her own session's calls) and a call returns only after a
// signed approval.
func TestMCPServeUnderPolicy(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	dir := t.TempDir()
	pub := map[string]string{}
	for _, name := range []string{"alice", "bob"} {
		pub[name] = newCLIKey(t, dir, name)
	}
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte(fmt.Sprintf(`approvers:
  alice: {key: %q, roles: [support]}
  bob:   {key: %q, roles: [support]}
tools:
  close_ticket: {approvers: {roles: [support]}}
`, pub["alice"], pub["bob"])), 0o644); err != nil {
		t.Fatal(err)
	}
	key := func(name string) string { return filepath.Join(dir, name+".key") }
	tokens := tokensFile(t)
	tok := newMCPToken(t, tokens, "alice", "--key", key("alice"))
	m := s.startMCPServe("mcp serve", "", tokens, "--policy", pol)
	cs := mcpConnect(t, m.url, tok, "policy")
	id := mcpRunID("alice", "policy")

	done := callAsync(t, cs, "close_ticket", `{"ticket_id":"TKT-3"}`, "")
	s.awaitWaiting(id, "c-1")
	if st := s.mustState(id); !st.Policy || st.RequestedBy != "alice" {
		t.Fatalf("run state policy=%v requested_by=%q, want the policy and alice (the token's name, signed)", st.Policy, st.RequestedBy)
	}
	addr := []string{"--address", s.address()}
	if out, code := runCLI(t, waitTimeout, append([]string{"approve", id, "c-1", "--as", "alice", "--key", key("alice")}, addr...)...); code != 1 ||
		!strings.Contains(out, "self-approval refused") {
		t.Fatalf("alice approving her own session's call: exit %d:\n%s", code, out)
	}
	if out, code := runCLI(t, waitTimeout, append([]string{"approve", id, "c-1", "--as", "bob"}, addr...)...); code != 1 || !strings.Contains(out, "unsigned") {
		t.Fatalf("an unsigned approval under the policy: exit %d:\n%s", code, out)
	}
	if out, code := runCLI(t, waitTimeout, append([]string{"approve", id, "c-1", "--as", "bob", "--key", key("bob")}, addr...)...); code != 0 {
		t.Fatalf("bob's signed approval: exit %d:\n%s", code, out)
	}
	res := <-done
	if res == nil || res.IsError || !strings.Contains(resultText(res), `"closed"`) {
		t.Fatalf("close_ticket after bob's signed approval: %+v", res)
	}
}
