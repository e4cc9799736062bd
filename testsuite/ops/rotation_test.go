package ops_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/encryption"
)

// TestKeyRotation: a key added to the key file while a run waits at the gate
// (`toolgate keys encryption K` again, the worker restarted on it) takes over
// encrypting: the run resumes on the restarted worker, which reads what the
// old key sealed, and its history ends up holding payloads under both keys.
// The key file with both replays it; one that lost the old key is refused,
// naming that key.
func TestKeyRotation(t *testing.T) {
	dir := t.TempDir()
	keys, key1 := newKeyFile(t, dir)

	p := startToolgate(t, "dev", "--no-worker", "--data", filepath.Join(dir, "server"), "--address", "127.0.0.1:0")
	address := strings.TrimPrefix(p.waitLine(t, "ready ", 2*time.Minute), "ready ")
	withKey := []string{"--address", address, "--encryption-key-file", keys}
	workerData := filepath.Join(dir, "worker")
	startWorker := func(newest string) *process {
		w := startToolgate(t, "worker", "--address", address, "--encryption-key-file", keys, "--data", workerData,
			"--token-file", filepath.Join(dir, "server", "auth", devserver.WorkerTokenFile))
		line := w.waitLine(t, "worker ready on", time.Minute)
		require.Contains(t, line, "newest key "+newest, "the worker encrypts with the key file's newest key")
		return w
	}
	w := startWorker(key1)
	id := "rot"

	res := toolgate(t, append([]string{"run", "--id", id, "--plan", writePlan(t)}, withKey...)...)
	require.Equal(t, 0, res.code, res.stderr)
	waitNext(t, id, "gate:close_ticket", withKey...)

	// Rotate while the run waits: stop the worker, add a newest key, start
	// the worker again on the same file.
	w.stop(t)
	res = toolgate(t, "keys", "encryption", keys)
	require.Equal(t, 0, res.code, res.stderr)
	kr, err := encryption.LoadKeyring(keys)
	require.NoError(t, err)
	require.Len(t, kr.IDs(), 2)
	require.Equal(t, key1, kr.IDs()[0], "the old key stays, oldest first")
	key2 := kr.Newest()
	require.NotEqual(t, key1, key2)
	startWorker(key2)

	res = toolgate(t, append([]string{"approve", id, "c-3", "--as", "alice"}, withKey...)...)
	require.Equal(t, 0, res.code, res.stdout+res.stderr)
	waitCompleted(t, id, withKey...)

	file, hist := exportHistory(t, address, id)
	require.ElementsMatch(t, []string{key1, key2}, encryption.KeyIDs(hist),
		"the history holds payloads sealed before the rotation (key 1) and after it (key 2)")

	res = toolgate(t, "replay", file, "--encryption-key-file", keys)
	require.Equal(t, 0, res.code, "replay with both keys: %s%s", res.stdout, res.stderr)

	// A key file that kept only the new key cannot read what the old one sealed.
	onlyNew := writeKeysWithout(t, keys, key1)
	res = toolgate(t, "replay", file, "--encryption-key-file", onlyNew)
	require.NotEqual(t, 0, res.code, "replay without key 1 passed: %s", res.stdout)
	require.Contains(t, res.stdout+res.stderr, key1, "the refusal names the key it lacks")
}

// writeKeysWithout writes (mode 0600) a copy of the key file at path without
// the key drop, and returns its path.
func writeKeysWithout(t *testing.T, path, drop string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var kf struct {
		Keys []map[string]any `json:"keys"`
	}
	require.NoError(t, json.Unmarshal(b, &kf))
	var kept []map[string]any
	for _, k := range kf.Keys {
		if k["id"] != drop {
			kept = append(kept, k)
		}
	}
	require.Len(t, kept, len(kf.Keys)-1, "the key file holds %s", drop)
	kf.Keys = kept
	b, err = json.Marshal(kf)
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "only-new.json")
	require.NoError(t, os.WriteFile(out, b, 0o600))
	kr, err := encryption.LoadKeyring(out)
	require.NoError(t, err)
	require.False(t, kr.Has(drop))
	return out
}
