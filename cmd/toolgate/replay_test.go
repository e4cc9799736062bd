package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runReplay runs `toolgate replay args...` and returns its stdout and error.
func runReplay(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), append([]string{"replay"}, args...), strings.NewReader(""), &stdout, &stderr)
	return stdout.String(), err
}

// liveHistories are the fixtures of rules versions this build runs.
const liveHistories = "../../testsuite/histories"

// incompatible is a copy of approve_v16.json whose first scheduled activity
// names another tool, as if the code had changed which it calls.
func incompatible(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(liveHistories, "approve_v16.json"))
	require.NoError(t, err)
	changed := strings.Replace(string(raw), `"name": "search_tickets"`, `"name": "search_tickets_v0"`, 1)
	require.NotEqual(t, string(raw), changed)
	path := filepath.Join(t.TempDir(), "incompatible.json")
	require.NoError(t, os.WriteFile(path, []byte(changed), 0o644))
	return path
}

// TestReplaySaysWhatIsWrong: `toolgate replay` blames the workflow code
// only for a history that does not replay against it; a missing file, an
// encrypted history without its key, or with a key file that lacks it, each
// say what is wrong and what to do.
func TestReplaySaysWhatIsWrong(t *testing.T) {
	good := filepath.Join(liveHistories, "approve_v16.json")
	missing := filepath.Join(t.TempDir(), "gone.json")
	enc := filepath.Join(liveHistories, "encrypted", "approve_v16.json")
	old := filepath.Join(auditHistories, "approve_v3.json")
	otherKeys := filepath.Join(t.TempDir(), "other.json")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"keys", "encryption", otherKeys}, strings.NewReader(""), &out, &out), out.String())
	const blame = "the workflow code changed incompatibly"
	for _, c := range []struct {
		name string
		args []string
		line string // in stdout, the file's FAIL line
		says string // in the error
	}{
		{"missing", []string{good, missing}, "FAIL " + missing + ": replaying " + missing + ": cannot read the history file: open " + missing + ": no such file or directory",
			"1 of 2 histories do not replay: 1 cannot be read (missing, unreadable, or not a history exported as JSON: see above)"},
		{"no key", []string{enc}, "its payloads are encrypted (key test-key-protects-nothing): pass --encryption-key-file FILE",
			"1 of 1 histories do not replay: 1 with encrypted payloads and no key: pass --encryption-key-file FILE"},
		{"retired", []string{old}, "FAIL " + old + ": replaying " + old + ": toolgate: run fixture-approve was started under rules version 3, which this worker no longer runs",
			"1 of 1 histories do not replay: 1 started under a rules version this build no longer runs: replay them with a build that runs it (docs/versions.md)"},
		{"wrong key", []string{enc, "--encryption-key-file", otherKeys}, "the key file " + otherKeys + " does not decrypt these payloads (they are encrypted with key test-key-protects-nothing, which it lacks)",
			"1 of 1 histories do not replay: 1 whose payloads the key file given does not decrypt: pass the key file of the workers that wrote them"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, err := runReplay(t, c.args...)
			require.Error(t, err, stdout)
			require.Contains(t, stdout, c.line)
			require.Contains(t, err.Error(), c.says)
			require.NotContains(t, err.Error(), blame)
		})
	}
	t.Run("incompatible", func(t *testing.T) {
		bad := incompatible(t)
		stdout, err := runReplay(t, good, bad)
		require.Error(t, err, stdout)
		require.Contains(t, stdout, "ok   "+good+"\n")
		require.Contains(t, stdout, "FAIL "+bad+": ")
		require.Contains(t, stdout, "[TMPRL1100]")
		require.Equal(t, "1 of 2 histories do not replay: "+blame+" (use workflow.GetVersion)", err.Error())
	})
	t.Run("mixed", func(t *testing.T) {
		stdout, err := runReplay(t, incompatible(t), missing)
		require.Error(t, err, stdout)
		require.Equal(t, "2 of 2 histories do not replay: 1 cannot be read (missing, unreadable, or not a history exported as JSON: see above); "+
			"1 incompatible with this binary's workflow code: "+blame+" (use workflow.GetVersion)", err.Error())
	})
}
