package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/workflows"
)

// `toolgate run` says when the worker refused the run at once (an unsigned
// start under require_signed_start, a start signed by no approver of the
// policy), and exits non-zero; a run no worker takes within the wait's
// bound is started, and it says that no worker has picked it up.
func TestRunSaysWhenTheWorkerRefusedIt(t *testing.T) {
	longSuite(t)
	t.Parallel()
	s := newStack(t)
	dir := t.TempDir()
	lines := map[string]string{}
	for _, name := range []string{"dave", "mallory"} {
		lines[name] = newCLIKey(t, dir, name)
	}
	pol := writeFile(t, dir, "policy.yaml", fmt.Sprintf(`require_signed_start: true
approvers:
  dave:  {key: %q, roles: [support]}
tools:
  close_ticket: {approvers: {roles: [support]}}
`, lines["dave"]))
	s.startWorkerProc("worker", nil, "--policy", pol)
	key := func(name string) string { return filepath.Join(dir, name+".key") }
	cli := cliAt(t, s.server.Address())

	// Refused at once: the run says so, and exits non-zero.
	goal := "find the login ticket and close it"
	for _, c := range []struct {
		id   string
		args []string
		want string
	}{
		{"unsigned-start", nil, "run unsigned-start was refused at its start: request_token required: this worker's policy takes only signed starts"},
		{"stranger-start", []string{"--as", "mallory", "--key", key("mallory")}, "run stranger-start was refused at its start: request_token refused: "},
	} {
		out := cli(1, append([]string{"run", "--id", c.id, "--goal", goal}, c.args...)...)
		t.Logf("toolgate run --id %s: %s", c.id, out)
		if !strings.Contains(out, c.want) || strings.Contains(out, "started") {
			t.Errorf("toolgate run --id %s, want %q and no \"started\":\n%s", c.id, c.want, out)
		}
	}

	// Taken: started, as ever.
	const id = "signed-start"
	if out := cli(0, "run", "--id", id, "--goal", goal, "--as", "dave", "--key", key("dave")); !strings.Contains(out, "started "+id+" (run ") ||
		!strings.HasSuffix(strings.TrimSpace(out), "on task queue "+workflows.TaskQueue) {
		t.Errorf("toolgate run of a signed start:\n%s", out)
	}
	s.awaitStatus(id, workflows.StatusWaitingForApproval, 1, waitTimeout)

	// No worker on the queue: started, and said so (after the wait's bound).
	const lonely = "lonely-start"
	out := cli(0, "run", "--id", lonely, "--goal", goal, "--task-queue", "nobody-serves-this", "--as", "dave", "--key", key("dave"))
	if want := "started " + lonely + " (run "; !strings.Contains(out, want) ||
		!strings.Contains(out, "on task queue nobody-serves-this (no worker has picked it up yet: is a worker serving task queue nobody-serves-this?)") {
		t.Errorf("toolgate run on a queue no worker serves:\n%s", out)
	}
}
