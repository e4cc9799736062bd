package remotetools_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/remotetools"
	"github.com/toolgate/toolgate/worker"
)

// The example file the README and the flag's help point at loads, with
// every field it writes.
func TestExampleFileLoads(t *testing.T) {
	tools, err := remotetools.Load(filepath.Join("..", "examples", "tools-remote.yaml"))
	require.NoError(t, err)
	require.Len(t, tools, 3)
	refund := tools[0].Spec
	require.Equal(t, "refund_ts", refund.Name)
	require.Equal(t, "toolgate-ts-tools", refund.TaskQueue)
	require.Equal(t, "refund_ts", refund.ActivityType())
	require.True(t, refund.Destructive)
	require.False(t, refund.Memoized())
	require.Equal(t, 30*time.Second, refund.Timeout)
	require.Equal(t, int32(5), refund.Retry.MaxAttempts)
	require.Equal(t, time.Second, refund.Retry.InitialInterval)
	require.Equal(t, []string{"CardDeclined"}, refund.Retry.NonRetryable)
	var schema map[string]any
	require.NoError(t, json.Unmarshal(refund.Schema, &schema))
	require.Equal(t, []any{"order", "amount"}, schema["required"])
	require.True(t, tools[1].Spec.Memoized(), "a read is memoized unless it says memo: false")
	require.False(t, tools[2].Spec.Memoized(), "memo: false")
	for _, tl := range tools {
		require.Nil(t, tl.Run, "the worker of its task queue hosts it")
	}
	// A worker takes them with no implementation of its own.
	require.NoError(t, worker.Options{Tools: tools}.Validate())
}

// Every kind of bad declaration is refused, saying which tool and what.
func TestBadFilesAreRefusedWithTheReason(t *testing.T) {
	cases := map[string]struct{ file, want string }{
		"unknown field":       {"tools:\n  - name: a\n    task_queue: q\n    destructve: true\n", "line 4: field destructve not found"},
		"no task queue":       {"tools:\n  - name: a\n", "tool a: task_queue is empty"},
		"memo on destructive": {"tools:\n  - name: a\n    task_queue: q\n    destructive: true\n    memo: true\n", "tool a: memo: true on a destructive tool"},
		"bad duration":        {"tools:\n  - name: a\n    task_queue: q\n    timeout: soon\n", `tool a: timeout "soon": want a duration`},
		"bad queue":           {"tools:\n  - name: a\n    task_queue: \"has space\"\n", `tool a: task_queue "has space"`},
		"bad name":            {"tools:\n  - name: \"1x\"\n    task_queue: q\n", `tool name "1x"`},
		"twice":               {"tools:\n  - {name: a, task_queue: q}\n  - {name: a, task_queue: q}\n", "tools[1]: tool a is declared twice"},
		"bad schema":          {"tools:\n  - name: a\n    task_queue: q\n    schema: {type: 7}\n", "tool a"},
		"unbounded retries":   {"tools:\n  - name: a\n    task_queue: q\n    retry: {max_attempts: 1000}\n", "retry.max_attempts 1000 is outside"},
		"empty":               {"", "empty"},
		"no tools":            {"tools: []\n", "no tools"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := remotetools.Parse([]byte(c.file))
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
		})
	}
}

func TestOversizedFileIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tools.yaml")
	require.NoError(t, os.WriteFile(path, []byte("tools:\n"+strings.Repeat("#", remotetools.MaxFileBytes)), 0o600))
	_, err := remotetools.Load(path)
	require.ErrorContains(t, err, "more than")
}
