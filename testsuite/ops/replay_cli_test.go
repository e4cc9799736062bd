package ops_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func histories(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(moduleRoot, "testsuite", "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories: go run ./testsuite/histories/record")
	return files
}

// TestReplayCommand: `toolgate replay FILE...` replays every recorded
// history against the binary's workflow code: exit 0 and one "ok" line per file.
func TestReplayCommand(t *testing.T) {
	files := histories(t)
	res := toolgate(t, append([]string{"replay"}, files...)...)
	require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	require.Len(t, lines, len(files), res.stdout)
	for i, f := range files {
		require.Equal(t, "ok   "+f, lines[i])
	}
}

// corrupt writes a copy of the history at src with change applied to its
// events (decoded as generic JSON), and returns the copy's path.
func corrupt(t *testing.T, src string, change func(events []any) bool) string {
	t.Helper()
	raw, err := os.ReadFile(src)
	require.NoError(t, err)
	var h map[string]any
	require.NoError(t, json.Unmarshal(raw, &h))
	require.True(t, change(h["events"].([]any)), "nothing to corrupt in %s", src)
	out, err := json.MarshalIndent(h, "", "  ")
	require.NoError(t, err)
	dst := filepath.Join(t.TempDir(), "corrupted-"+filepath.Base(src))
	require.NoError(t, os.WriteFile(dst, out, 0o644))
	return dst
}

// TestReplayCommandCatchesCorruptHistory: a history that no longer matches
// the code — an activity type renamed, or an event's type changed — makes
// `toolgate replay` say FAIL for that file (ok for the others) and exit non-zero.
func TestReplayCommandCatchesCorruptHistory(t *testing.T) {
	good := filepath.Join(moduleRoot, "testsuite", "histories", "approve_v16.json")
	cases := map[string]func(events []any) bool{
		// The first scheduled activity (search_tickets, c-1) as if the code
		// had called another tool.
		"activity type renamed": func(events []any) bool {
			for _, e := range events {
				attrs, ok := e.(map[string]any)["activityTaskScheduledEventAttributes"].(map[string]any)
				if !ok {
					continue
				}
				at := attrs["activityType"].(map[string]any)
				require.Equal(t, "search_tickets", at["name"])
				at["name"] = "search_tickets_v0"
				return true
			}
			return false
		},
		// The search-attribute upsert recorded as a marker instead.
		"event type changed": func(events []any) bool {
			for _, e := range events {
				ev := e.(map[string]any)
				if ev["eventType"] == "EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES" {
					ev["eventType"] = "EVENT_TYPE_TIMER_STARTED"
					return true
				}
			}
			return false
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			bad := corrupt(t, good, change)
			res := toolgate(t, "replay", good, bad)
			require.NotEqual(t, 0, res.code, "stdout:\n%s", res.stdout)
			require.Contains(t, res.stdout, "ok   "+good+"\n")
			require.Contains(t, res.stdout, "FAIL "+bad+": ")
			require.Contains(t, res.stderr, "1 of 2 histories do not replay")
			t.Logf("toolgate replay says:\n%s%s", res.stdout, res.stderr)
		})
	}
}
