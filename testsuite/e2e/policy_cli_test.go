package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/workflows"
)

// `toolgate demo --yes --policy examples/policy.yaml`: one command shows
// roles and rules — the close waits for support and alice's signed approval,
// a small refund runs by rule, a large one needs two of finance, a test
// refund is denied by rule.
func TestDemoWithPolicy(t *testing.T) {
	t.Parallel()
	bin := toolgateBinary(t)
	data := filepath.Join(t.TempDir(), "fresh")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--yes", "--data", data, "--policy", filepath.Join("..", "..", "examples", "policy.yaml"))
	cmd.Env = childEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("toolgate demo --policy: %v; output:\n%s", err, out)
	}
	for _, want := range []string{
		"approved c-3 (close_ticket) by alice",
		"by rule:small-refunds",
		"counted c-2 (refund) by bob: 1 of 2 approvals",
		"approved c-2 (refund) by carol: 2 of 2 approvals (bob, carol)",
		"denied by rule no-test-refunds",
		"ticket TKT-3 \"Cannot log in after password reset\" is closed",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the demo's output has no %q", want)
		}
	}
	if strings.Contains(string(out), "WARNING") || strings.Contains(string(out), "policy: warning") {
		t.Errorf("the demo under a policy warns (issue #46: a newcomer's demo says nothing is wrong when nothing is)")
	}
	if !strings.Contains(string(out), "AG-UI chat: off under --policy") {
		t.Errorf("the demo under a policy does not say why it offers no AG-UI chat")
	}
	for _, name := range []string{"alice", "bob", "carol"} {
		st, err := os.Stat(filepath.Join(data, "keys", name+".key"))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("demo key of %s: %v, mode %v; want a 0600 file", name, err, st)
		}
		if _, err := os.Stat(filepath.Join(data, "keys", name+".pub")); err != nil {
			t.Errorf("demo key of %s has no public key beside it: %v", name, err)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

// The operator's path with a policy, all through the binary: keys made with
// `toolgate keys new`, a worker started with `--policy`, a signed start, and
// decisions that are refused unless signed by an approver of the right role
// who did not request the run; a grant made and revoked.
func TestSignedDecisionsFromTheCLI(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	dir := t.TempDir()
	lines := map[string]string{}
	for _, name := range []string{"alice", "bob"} {
		lines[name] = newCLIKey(t, dir, name)
	}
	pol := writeFile(t, dir, "policy.yaml", fmt.Sprintf(`approvers:
  alice: {key: %q, roles: [support]}
  bob:   {key: %q, roles: [finance]}
tools:
  close_ticket: {approvers: {roles: [support]}}
`, lines["alice"], lines["bob"]))
	s.startWorkerProc("worker", nil, "--policy", pol)
	key := func(name string) string { return filepath.Join(dir, name+".key") }
	cli := cliAt(t, s.server.Address())

	const id = "cli-policy"
	cli(0, "run", "--id", id, "--goal", "find the login ticket and close it", "--as", "bob", "--key", key("bob"))
	s.awaitStatus(id, workflows.StatusWaitingForApproval, 1, waitTimeout)
	if out := cli(0, "status", id); !strings.Contains(out, "requested by: bob") || !strings.Contains(out, "needs 1 of role support") {
		t.Errorf("status does not show the requester and who may decide:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--as", "alice"}, "unsigned"},
		{[]string{"--as", "bob", "--key", key("bob")}, "wrong role"},
		{[]string{"--as", "alice", "--key", key("bob")}, "bad signature"},
	} {
		out := cli(1, append([]string{"approve", id, "c-3"}, c.args...)...)
		if !strings.Contains(out, c.want) {
			t.Errorf("approve %v: want %q in:\n%s", c.args, c.want, out)
		}
	}
	if out := cli(0, "grant", id, "close_ticket", "--as", "alice", "--key", key("alice"), "--uses", "1"); !strings.Contains(out, "granted grant g-1: close_ticket by alice, used 0 of 1") {
		t.Errorf("grant:\n%s", out)
	}
	if out := cli(1, "revoke", id, "g-1", "--as", "bob", "--key", key("bob")); !strings.Contains(out, "only they or an approver who shares a role") {
		t.Errorf("revoke by bob:\n%s", out)
	}
	if out := cli(0, "revoke", id, "g-1", "--as", "alice", "--key", key("alice")); !strings.Contains(out, "revoked by alice") {
		t.Errorf("revoke by alice:\n%s", out)
	}
	if out := cli(0, "approve", id, "c-3", "--as", "alice", "--key", key("alice"), "--note", "checked"); !strings.Contains(out, "approved c-3 (close_ticket) by alice") {
		t.Errorf("approve by alice:\n%s", out)
	}
	res := s.result(id, waitTimeout)
	if res.Status != workflows.StatusCompleted {
		t.Fatalf("run %s: %+v", id, res)
	}
	approved := records(res.Trace, "c-3", workflows.TraceApproved)
	if len(approved) != 1 || approved[0].Approver != "alice" || approved[0].Reason != "checked" {
		t.Errorf("c-3 approvals in the trace: %+v, want one by alice with her note", approved)
	}
}

// publicKeyLine is the policy line `toolgate keys new` prints.
var publicKeyLine = regexp.MustCompile(`key: "(ed25519:[A-Za-z0-9_-]+)"`)

// newCLIKey makes name's key pair in dir with `toolgate keys new` (the
// private key in dir/NAME.key) and returns the public key it prints for the
// policy.
func newCLIKey(t *testing.T, dir, name string) string {
	t.Helper()
	out, code := runCLI(t, waitTimeout, "keys", "new", name, "--dir", dir)
	m := publicKeyLine.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("toolgate keys new %s: exit %d, no public key printed:\n%s", name, code, out)
	}
	return m[1]
}
