package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/workflows"
)

// `toolgate demo --yes` on a fresh data directory runs the seed's support-desk
// walk-through end to end: one command, nothing but the binary.
func TestDemoYesOnAFreshDataDir(t *testing.T) {
	t.Parallel()
	bin := toolgateBinary(t)
	data := filepath.Join(t.TempDir(), "fresh")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--yes", "--data", data)
	cmd.Env = childEnv()
	began := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("toolgate demo --yes took %v", time.Since(began).Round(time.Millisecond))
	if ctx.Err() != nil {
		t.Fatalf("toolgate demo --yes did not finish within 60s; output:\n%s", out)
	}
	if err != nil {
		t.Fatalf("toolgate demo --yes: %v; output:\n%s", err, out)
	}
	for _, want := range []string{"cache_hit", "blocked", "approved", "closed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the demo's output has no %q", want)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

// The CLI's errors say what is wrong: an unknown run, an approval for a call
// the run does not have, and no server at the address.
func TestUnknownRunAndBadApprovalErrorsFromTheCLI(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startWorker(false)
	toolgateBinary(t) // wait for the build here, not inside a timed command
	addr := s.server.Address()

	out, code := runCLI(t, waitTimeout, "status", "nope", "--address", addr)
	t.Logf("toolgate status nope: exit %d: %s", code, out)
	if code == 0 || !strings.Contains(out, "no run with id nope") {
		t.Errorf("toolgate status nope: exit %d, output:\n%s\nwant non-zero and \"no run with id nope\"", code, out)
	}

	const id = "cli-errors"
	s.start(id, workflows.RunInput{Goal: "close TKT-3",
		Planner: scripted("closed", step(call("close_ticket", `{"ticket_id":"TKT-3"}`)))})
	s.awaitNext(id, waitTimeout, "gate:close_ticket")

	out, code = runCLI(t, waitTimeout, "approve", id, "c-99", "--address", addr, "--as", "tester")
	t.Logf("toolgate approve %s c-99: exit %d: %s", id, code, out)
	if code == 0 || !strings.Contains(out, "call c-99 has not been proposed yet") {
		t.Errorf("toolgate approve %s c-99: exit %d, output:\n%s\nwant non-zero and that call c-99 has not been proposed yet", id, code, out)
	}
	// The refused approval changed nothing.
	if st := s.mustState(id); st.Status != workflows.StatusWaitingForApproval || len(st.Interrupts) != 1 || st.Interrupts[0].CallID != "c-1" {
		t.Errorf("after the refused approval: %+v, want still waiting for c-1", st)
	}

	out, code = runCLI(t, waitTimeout, "status", "--address", "127.0.0.1:1", "x")
	t.Logf("toolgate status --address 127.0.0.1:1 x: exit %d: %s", code, out)
	if code == 0 || !strings.Contains(out, "cannot connect to Temporal at 127.0.0.1:1") || !strings.Contains(out, "nothing answers there: start a server") {
		t.Errorf("toolgate status --address 127.0.0.1:1 x: exit %d, output:\n%s\nwant non-zero, where it tried and \"nothing answers there: start a server\"", code, out)
	}
}
