package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// `toolgate status` of a run whose result it cannot decode says so, why and
// what to do, and exits 1 — it shows no status (it used to say "failed"
// with exit 0): a run of an encrypting worker read without
// --encryption-key-file (and, with the key, it shows the run completed), one
// that waits at the gate (its state cannot be read), and a run named
// AgentRun whose result is not a RunResult.
func TestStatusOfAnUnreadableRunSaysSoAndFails(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.json")
	cli := cliAt(t, s.server.Address())
	if out, code := runCLI(t, waitTimeout, "keys", "encryption", keys); code != 0 {
		t.Fatalf("toolgate keys encryption: exit %d\n%s", code, out)
	}
	s.startWorkerProc("worker", nil, "--encryption-key-file", keys)
	plan := writeFile(t, dir, "plan.json", `{"goal":"look","planner":{"kind":"scripted","answer":"found it",
  "turns":[[{"tool":"search_tickets","args":{"query":"login"}}]]}}`)
	const id = "encrypted-status"
	cli(0, "run", "--id", id, "--plan", plan, "--wait", "--encryption-key-file", keys)

	out := cli(1, "status", id)
	for _, want := range []string{"run " + id + " has completed, but its result cannot be read", "pass --encryption-key-file FILE"} {
		if !strings.Contains(out, want) {
			t.Errorf("toolgate status without the key, want %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "status:") {
		t.Errorf("toolgate status without the key calls the run failed:\n%s", out)
	}
	if out := cli(0, "status", id, "--encryption-key-file", keys); !strings.Contains(out, "status: "+workflows.StatusCompleted) || !strings.Contains(out, "found it") {
		t.Errorf("toolgate status with the key:\n%s", out)
	}

	// A run that waits at the gate: its state cannot be read without the key.
	closePlan := writeFile(t, dir, "close.json", `{"goal":"close","planner":{"kind":"scripted","answer":"closed",
  "turns":[[{"tool":"close_ticket","args":{"ticket_id":"TKT-1"}}]]}}`)
	const waiting = "encrypted-waiting"
	cli(0, "run", "--id", waiting, "--plan", closePlan, "--encryption-key-file", keys)
	testenv.Eventually(t, waitTimeout, waiting+" at the gate", func() error {
		if out, code := runCLI(t, waitTimeout, "next", waiting, "--address", s.server.Address(), "--encryption-key-file", keys); code != 0 || !strings.Contains(out, "gate:close_ticket") {
			return fmt.Errorf("toolgate next: exit %d: %s", code, out)
		}
		return nil
	})
	out = cli(1, "status", waiting)
	for _, want := range []string{"the state of run " + waiting + " cannot be read", "pass --encryption-key-file FILE"} {
		if !strings.Contains(out, want) {
			t.Errorf("toolgate status of a waiting run without the key, want %q:\n%s", want, out)
		}
	}

	// A workflow named AgentRun, of another worker, whose result is a string.
	const queue, other = "not-toolgate", "not-a-run-result"
	w := sdkworker.New(s.client, queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(func(workflow.Context) (string, error) { return "hello", nil }, workflow.RegisterOptions{Name: workflows.WorkflowName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	wr, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: other, TaskQueue: queue}, workflows.WorkflowName)
	if err != nil {
		t.Fatal(err)
	}
	var hello string
	if err := wr.Get(ctx, &hello); err != nil || hello != "hello" {
		t.Fatalf("the other workflow: %q, %v", hello, err)
	}
	if out := cli(1, "status", other); !strings.Contains(out, "run "+other+" has completed, but its result cannot be read") || strings.Contains(out, "status:") {
		t.Errorf("toolgate status of a result that is not a RunResult:\n%s", out)
	}
}
