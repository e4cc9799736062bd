package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// Under a policy, rewind and fork are signed acts of an operator: from the
// toolgate CLI, an approver without an operators role is refused (and the
// run is unchanged), an unsigned rewind too; the operator's rewind is
// recorded with their name, and so is their fork.
func TestRewindAndForkAreAnOperatorsSignedActs(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	dir := t.TempDir()
	alicePub, olgaPub := newCLIKey(t, dir, "alice"), newCLIKey(t, dir, "olga")
	pol := writeFile(t, dir, "policy.yaml", fmt.Sprintf(`approvers:
  alice: {key: %q, roles: [support]}
  olga:  {key: %q, roles: [sre]}
operators: [sre]
tools:
  close_ticket: {approvers: {roles: [support]}}
`, alicePub, olgaPub))
	s.startWorkerProc("worker", nil, "--policy", pol)
	plan := writeFile(t, dir, "plan.json", `{"goal":"close TKT-1","planner":{"kind":"scripted","answer":"done",
  "turns":[[{"tool":"close_ticket","args":{"ticket_id":"TKT-1"}}],[{"tool":"search_tickets","args":{"query":"charged twice"}}]]}}`)
	as := func(who string) []string { return []string{"--as", who, "--key", filepath.Join(dir, who+".key")} }
	cli := cliAt(t, s.server.Address())
	const id = "policy-rewind"
	cli(0, "run", "--id", id, "--plan", plan)
	s.awaitCalls(id, "c-1")
	cli(0, append([]string{"approve", id, "c-1"}, as("alice")...)...)
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("before: %+v", res)
	}
	out := cli(0, "steps", id)
	if !regexp.MustCompile(`(?m)^1\s+1\s+c-1\s+close_ticket \(destructive\)\s+ok\s+alice\s+run \S+ event \d+$`).MatchString(out) {
		t.Errorf("toolgate steps:\n%s", out)
	}
	out = cli(0, "rewind", id, "--to", "c-1", "--dry-run")
	m := regexp.MustCompile(`(?m)^digest: ([0-9a-f]{64})$`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "c-1 close_ticket {\"ticket_id\":\"TKT-1\"} ->") || !strings.Contains(out, "c-1 close_ticket approved by alice") {
		t.Fatalf("toolgate rewind --dry-run:\n%s", out)
	}
	digest := m[1]
	t.Logf("toolgate rewind --dry-run:\n%s", out)
	before := len(s.mustTrace(id))

	if out := cli(1, append([]string{"rewind", id, "--to", "c-1", "--expect", digest}, as("alice")...)...); !strings.Contains(out, "alice holds [support]; rewinding or forking a run needs one of the operators' roles [sre]") {
		t.Errorf("alice's rewind:\n%s", out)
	}
	if out := cli(1, "rewind", id, "--to", "c-1", "--expect", digest, "--as", "olga"); !strings.Contains(out, "unsigned") {
		t.Errorf("an unsigned rewind:\n%s", out)
	}
	if after := s.mustState(id); after.Status != workflows.StatusCompleted || len(s.mustTrace(id)) != before {
		t.Errorf("refused rewinds changed the run: %+v", after)
	}
	if out := cli(0, append([]string{"rewind", id, "--to", "c-1", "--expect", digest}, as("olga")...)...); !strings.Contains(out, "rewound "+id+" to just before c-1 (step 1) by olga") {
		t.Errorf("olga's rewind:\n%s", out)
	}
	s.awaitCalls(id, "c-1")
	// The reset re-ran the run's first task: the note is checked once the
	// policy is loaded, and the steps of the new run replay.
	testenv.Eventually(t, waitTimeout, "the rewind recorded", func() error {
		if got := records(s.mustTrace(id), "c-1", workflows.TraceRewound); len(got) != 1 {
			return fmt.Errorf("rewound records %+v; refused %+v", got, s.mustState(id).Refused)
		}
		return nil
	})
	if out := cli(0, "steps", id); !regexp.MustCompile(`(?m)^1\s+1\s+c-1\s+close_ticket \(destructive\)\s+(blocked|rewound)\s+-`).MatchString(out) {
		t.Errorf("toolgate steps after the rewind:\n%s", out)
	}
	tr := s.mustTrace(id)
	if got := records(tr, "c-1", workflows.TraceRewound); len(got) != 1 || got[0].Approver != "olga" {
		t.Errorf("the rewind in the trace: %+v", tr)
	}

	fork := []string{"fork", id, "--at", "c-1", "--id", "policy-fork", "--args", `{"ticket_id":"TKT-2"}`}
	// The server takes the start; the run refuses it, and so does the command.
	const refusal = "fork refused: alice holds [support]; rewinding or forking a run needs one of the operators' roles [sre]"
	if out := cli(1, append(fork, as("alice")...)...); !strings.Contains(out, refusal) || strings.Contains(out, "forked ") {
		t.Errorf("toolgate fork by alice:\n%s\nwant exit 1 with %q", out, refusal)
	}
	var res workflows.RunResult
	if err := s.client.GetWorkflow(rewindCtx(t), "policy-fork", "").Get(rewindCtx(t), &res); err == nil ||
		!strings.Contains(err.Error(), refusal) {
		t.Errorf("alice's fork: %v, want refused", err)
	}
	fork[5] = "policy-fork-2"
	if out := cli(0, append(fork, as("olga")...)...); !strings.Contains(out, "forked "+id+" at c-1 as policy-fork-2") {
		t.Errorf("toolgate fork by olga:\n%s", out)
	}
	st := s.awaitCalls("policy-fork-2", "c-1")
	if st.RequestedBy != "" || !slices.Equal(st.ForkedBy, []string{"olga"}) || string(st.Interrupts[0].CallArgs) != `{"ticket_id":"TKT-2"}` {
		t.Errorf("olga's fork: %+v", st)
	}
}
