package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/workflows"
)

// The rewind preview lists the grants and revokes after the point, which a
// rewind drops, as it lists the decisions it drops: bob's grant made while
// c-1 waited and alice's revoke of it made while c-3 waited, for a rewind
// to c-1; the revoke only, for a rewind to c-3 (the grant came before
// c-3's step). After the rewind to c-1 the grant is gone: the close it let
// through (c-2) waits at the gate again.
func TestRewindPreviewListsTheGrantsItDrops(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	dir := t.TempDir()
	alicePub, bobPub, olgaPub := newCLIKey(t, dir, "alice"), newCLIKey(t, dir, "bob"), newCLIKey(t, dir, "olga")
	pol := writeFile(t, dir, "policy.yaml", fmt.Sprintf(`approvers:
  alice: {key: %q, roles: [support]}
  bob:   {key: %q, roles: [support]}
  olga:  {key: %q, roles: [sre]}
operators: [sre]
tools:
  close_ticket: {approvers: {roles: [support]}}
`, alicePub, bobPub, olgaPub))
	s.startWorkerProc("worker", nil, "--policy", pol)
	plan := writeFile(t, dir, "plan.json", `{"goal":"close three tickets","planner":{"kind":"scripted","answer":"done","turns":[
  [{"tool":"close_ticket","args":{"ticket_id":"TKT-1"}}],
  [{"tool":"close_ticket","args":{"ticket_id":"TKT-2"}}],
  [{"tool":"close_ticket","args":{"ticket_id":"TKT-3"}}]]}}`)
	as := func(who string) []string { return []string{"--as", who, "--key", filepath.Join(dir, who+".key")} }
	cli := cliAt(t, s.server.Address())
	const id = "rewind-grants"
	cli(0, "run", "--id", id, "--plan", plan)
	s.awaitCalls(id, "c-1")
	cli(0, append([]string{"grant", id, "close_ticket", "--uses", "1"}, as("bob")...)...)
	cli(0, append([]string{"approve", id, "c-1"}, as("alice")...)...)
	s.awaitCalls(id, "c-3") // c-2 passed by bob's grant, which it used up
	if got := records(s.mustTrace(id), "c-2", workflows.TraceApproved); len(got) != 1 || got[0].Approver != "grant:bob" {
		t.Fatalf("c-2's approval: %+v, want bob's grant", got)
	}
	cli(0, append([]string{"revoke", id, "g-1"}, as("alice")...)...)

	granted := "  g-1 close_ticket granted by bob (1 use)\n"
	revoked := "  g-1 close_ticket revoked by alice (granted by bob)\n"
	out := cli(0, "rewind", id, "--to", "c-1", "--dry-run")
	if !strings.Contains(out, "grants and revokes dropped (a dropped grant lets no call through; a dropped revoke puts its grant back in force):\n"+granted+revoked) {
		t.Errorf("the preview of a rewind to c-1 does not list the grant and the revoke it drops:\n%s", out)
	}
	if !strings.Contains(out, "  c-1 close_ticket approved by alice\n") {
		t.Errorf("the preview of a rewind to c-1 does not list alice's approval:\n%s", out)
	}
	m := regexp.MustCompile(`(?m)^digest: ([0-9a-f]{64})$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no digest in the preview:\n%s", out)
	}
	if out := cli(0, "rewind", id, "--to", "c-3", "--dry-run"); !strings.Contains(out, ":\n"+revoked+"reads that run again") || strings.Contains(out, granted) {
		t.Errorf("the preview of a rewind to c-3 should list the revoke only:\n%s", out)
	}
	t.Logf("toolgate rewind --dry-run:\n%s", out)

	cli(0, append([]string{"rewind", id, "--to", "c-1", "--expect", m[1]}, as("olga")...)...)
	if st := s.awaitCalls(id, "c-1"); len(st.Grants) != 0 {
		t.Errorf("grants after the rewind: %+v, want none", st.Grants)
	}
	cli(0, append([]string{"approve", id, "c-1"}, as("alice")...)...)
	s.awaitCalls(id, "c-2") // no grant lets it through now
}
