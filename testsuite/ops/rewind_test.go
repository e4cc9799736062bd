package ops_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/timeline"
)

// `toolgate steps`, `rewind` and `fork` on a dev server with encrypted
// payloads in a namespace of its own: the steps and the preview read the
// encrypted history with the key (a failed call's error, encrypted too,
// reads as it was), the rewind resets in that namespace, and the worker's
// fork activity reads the source's encrypted history.
func TestRewindAndForkEncryptedInANamespace(t *testing.T) {
	dir := t.TempDir()
	keys, _ := newKeyFile(t, dir)
	const ns = "agents"
	p := startToolgate(t, "dev", "--data", filepath.Join(dir, "data"), "--address", "127.0.0.1:0", "--namespace", ns, "--encryption-key-file", keys)
	address := strings.TrimPrefix(p.waitLine(t, "ready ", 2*time.Minute), "ready ")
	conn := []string{"--address", address, "--namespace", ns, "--encryption-key-file", keys}
	plan := filepath.Join(dir, "plan.json")
	require.NoError(t, os.WriteFile(plan, []byte(`{"goal":"close the login ticket","planner":{"kind":"scripted","answer":"closed","turns":[`+
		`[{"tool":"get_ticket","args":{"ticket_id":"TKT-99"}}],`+
		`[{"tool":"close_ticket","args":{"ticket_id":"TKT-3"}}]]}}`), 0o644))
	const id = "enc-rewind"
	res := toolgate(t, append([]string{"run", "--id", id, "--plan", plan}, conn...)...)
	require.Equal(t, 0, res.code, res.stderr)
	waitNext(t, id, "gate:close_ticket", conn...)
	res = toolgate(t, append([]string{"approve", id, "c-2", "--as", "alice"}, conn...)...)
	require.Equal(t, 0, res.code, res.stderr)
	waitCompleted(t, id, conn...)

	res = toolgate(t, append([]string{"steps", id, "--json"}, conn...)...)
	require.Equal(t, 0, res.code, res.stderr)
	var tl timeline.Timeline
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &tl), res.stdout)
	require.Len(t, tl.Steps, 2, res.stdout)
	require.Contains(t, tl.Steps[0].Calls[0].Error, "TKT-99", "the failed read's error, decrypted")
	require.Equal(t, "alice", tl.Steps[1].Calls[0].Approver)

	res = toolgate(t, append([]string{"rewind", id, "--to", "c-2", "--dry-run"}, conn...)...)
	require.Equal(t, 0, res.code, res.stderr)
	require.Contains(t, res.stdout, `c-2 close_ticket {"ticket_id":"TKT-3"} -> {"id":"TKT-3","status":"closed"`, "the close's result, decrypted")
	digest := regexp.MustCompile(`(?m)^digest: ([0-9a-f]{64})$`).FindStringSubmatch(res.stdout)
	require.NotNil(t, digest, res.stdout)
	res = toolgate(t, append([]string{"rewind", id, "--to", "c-2", "--expect", digest[1], "--as", "olga"}, conn...)...)
	require.Equal(t, 0, res.code, res.stderr)
	waitNext(t, id, "gate:close_ticket", conn...)

	res = toolgate(t, append([]string{"fork", id, "--at", "c-2", "--id", "enc-fork", "--args", `{"ticket_id":"TKT-4"}`, "--as", "olga"}, conn...)...)
	require.Equal(t, 0, res.code, res.stderr)
	waitNext(t, "enc-fork", "gate:close_ticket", conn...)
	res = toolgate(t, append([]string{"status", "enc-fork", "--json"}, conn...)...)
	require.Equal(t, 0, res.code, res.stderr)
	require.Contains(t, res.stdout, "TKT-4", "the fork waits with its own arguments")
}
