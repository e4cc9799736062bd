package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/testsuite/testenv"
)

// Every command that reads a run of a worker that encrypts payloads, given
// no key, says to pass the key — status, next, trace, pending, approve,
// reject, respond — and none blames the worker.
func TestEncryptedRunWithoutTheKeySaysToPassIt(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.json")
	if out, code := runCLI(t, waitTimeout, "keys", "encryption", keys); code != 0 {
		t.Fatalf("toolgate keys encryption: exit %d\n%s", code, out)
	}
	s.startWorkerProc("worker", nil, "--encryption-key-file", keys)
	cli := cliAt(t, s.server.Address())
	plan := writeFile(t, dir, "close.json", `{"goal":"close","planner":{"kind":"scripted","answer":"closed",
  "turns":[[{"tool":"close_ticket","args":{"ticket_id":"TKT-1"}}]]}}`)
	const id = "encrypted-decide"
	cli(0, "run", "--id", id, "--plan", plan, "--encryption-key-file", keys)
	testenv.Eventually(t, waitTimeout, id+" at the gate", func() error {
		if out, code := runCLI(t, waitTimeout, "next", id, "--address", s.server.Address(), "--encryption-key-file", keys); code != 0 || !strings.Contains(out, "gate:close_ticket") {
			return fmt.Errorf("toolgate next: exit %d: %s", code, out)
		}
		return nil
	})
	for _, args := range [][]string{
		{"status", id}, {"next", id}, {"trace", id}, {"pending"},
		{"approve", id, "c-1", "--as", "alice"},
		{"reject", id, "c-1", "--reason", "no", "--as", "alice"},
		{"respond", id, "c-1", "--response", `{"ok":true}`, "--as", "alice"},
	} {
		out := cli(1, args...)
		t.Logf("toolgate %s without the key:\n%s", strings.Join(args, " "), out)
		if !strings.Contains(out, "pass --encryption-key-file FILE (the key file the worker uses)") {
			t.Errorf("toolgate %s without the key, want that it pass --encryption-key-file FILE (the key file the worker uses):\n%s", strings.Join(args, " "), out)
		}
		if strings.Contains(out, "worker running") || strings.Contains(out, "worker polling") {
			t.Errorf("toolgate %s without the key blames the worker:\n%s", strings.Join(args, " "), out)
		}
	}
	// Nothing was decided: with the key, the call still waits, and is approved.
	if out := cli(0, "approve", id, "c-1", "--as", "alice", "--encryption-key-file", keys); !strings.Contains(out, "approved c-1 (close_ticket) by alice") {
		t.Errorf("toolgate approve with the key:\n%s", out)
	}
}
