package e2e

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/workflows"
)

// A decision for a run that has completed says so — not that there is no
// such run — and a run that does not exist is still "no run with id".
func TestDecisionForACompletedRunSaysItCompleted(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startWorker(false)
	toolgateBinary(t) // wait for the build here, not inside a timed command
	cli := cliAt(t, s.server.Address())

	const id = "closed-decision"
	s.start(id, workflows.RunInput{Goal: "look", Planner: scripted("found it", step(call("search_tickets", `{"query":"login"}`)))})
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("run %s: %+v", id, res)
	}
	out := cli(1, "reject", id, "c-3", "--reason", "x", "--as", "tester")
	t.Logf("toolgate reject %s c-3: %s", id, out)
	if !strings.Contains(out, "reject c-3 refused: run "+id+" has completed (closed at ") || !strings.Contains(out, "): it takes no more decisions") {
		t.Errorf("toolgate reject of a completed run, want that it has completed and takes no more decisions:\n%s", out)
	}
	if strings.Contains(out, "no run with id") {
		t.Errorf("toolgate reject of a completed run says there is no such run:\n%s", out)
	}
	if out := cli(1, "approve", "nope", "c-3", "--as", "tester"); !strings.Contains(out, "no run with id nope") {
		t.Errorf("toolgate approve of a run that does not exist:\n%s", out)
	}
}
