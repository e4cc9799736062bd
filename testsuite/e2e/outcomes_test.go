package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// `toolgate respond` answers a read in the tool's place and is refused for
// a destructive call (saying why), which `toolgate reject --cancel` then
// cancels: each outcome is in the trace as what the human decided, and the
// close never runs.
func TestRespondAndCancelFromTheCLI(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	dir := t.TempDir()
	alicePub := newCLIKey(t, dir, "alice")
	pol := writeFile(t, dir, "policy.yaml", fmt.Sprintf(`approvers:
  alice: {key: %q, roles: [support]}
tools:
  search_tickets:
    rules:
      - {id: ask-archive, when: "args.query == 'archive'", decide: ask, approvers: {roles: [support]}}
  close_ticket: {approvers: {roles: [support]}}
`, alicePub))
	s.startWorkerProc("worker", nil, "--policy", pol)
	plan := writeFile(t, dir, "plan.json", `{"goal":"look in the archive, then close TKT-1","planner":{"kind":"scripted","answer":"done",
  "turns":[[{"tool":"search_tickets","args":{"query":"archive"}},{"tool":"close_ticket","args":{"ticket_id":"TKT-1"}}]]}}`)
	alice := []string{"--as", "alice", "--key", filepath.Join(dir, "alice.key")}
	cli := cliAt(t, s.server.Address())
	const id = "cli-outcomes"
	cli(0, "run", "--id", id, "--plan", plan)
	testenv.Eventually(t, waitTimeout, "both calls waiting", func() error {
		st, err := s.state(id)
		if err != nil {
			return err
		}
		if len(st.Interrupts) != 2 {
			return fmt.Errorf("status %s, %d waiting", st.Status, len(st.Interrupts))
		}
		return nil
	})

	if out := cli(1, append([]string{"respond", id, "c-2", "--response", `{"closed":true}`}, alice...)...); !strings.Contains(out, "respond refused: close_ticket is destructive") {
		t.Errorf("respond to the close:\n%s", out)
	}
	if out := cli(0, append([]string{"respond", id, "c-1", "--response", `{"tickets":[]}`, "--note", "nothing archived"}, alice...)...); !strings.Contains(out, "responded c-1 (search_tickets) by alice") {
		t.Errorf("respond to the read:\n%s", out)
	}
	if out := cli(0, append([]string{"reject", id, "c-2", "--cancel", "--reason", "the customer withdrew"}, alice...)...); !strings.Contains(out, "cancelled c-2 (close_ticket) by alice") {
		t.Errorf("cancel the close:\n%s", out)
	}
	res := s.result(id, waitTimeout)
	if res.Status != workflows.StatusCompleted {
		t.Fatalf("run %s: %+v", id, res)
	}
	responded := records(res.Trace, "c-1", workflows.TraceResponded)
	if len(responded) != 1 || string(responded[0].Result) != `{"tickets":[]}` || responded[0].Approver != "alice" {
		t.Errorf("c-1 in the trace: %+v, want one response by alice", res.Trace)
	}
	if got := records(res.Trace, "c-2", workflows.TraceCancelled); len(got) != 1 || got[0].Reason != "the customer withdrew" {
		t.Errorf("c-2 in the trace: %+v, want one cancellation with its reason", res.Trace)
	}
	if got := records(res.Trace, "c-2", workflows.TraceOK); len(got) != 0 {
		t.Errorf("the cancelled close ran: %+v", got)
	}
}
