// Package replay replays recorded AgentRun histories against the current
// workflow code, so a change that would break runs in flight is caught before
// it ships. Use it in your own tests:
//
//	func TestMyHistoriesReplay(t *testing.T) {
//		if err := replay.Dir("testdata/histories"); err != nil {
//			t.Fatal(err)
//		}
//	}
package replay

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/workflows"
)

// File replays one history exported as JSON (`temporal workflow show
// --output json`, or the files under testsuite/histories).
func File(path string) error {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(workflows.AgentRun, workflow.RegisterOptions{Name: workflows.WorkflowName})
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	if err := r.ReplayWorkflowHistoryFromJSONFile(logger, path); err != nil {
		return fmt.Errorf("replaying %s: %w", path, err)
	}
	return nil
}

// Dir replays every *.json history in dir.
func Dir(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no *.json histories in %s", dir)
	}
	for _, f := range files {
		if err := File(f); err != nil {
			return err
		}
	}
	return nil
}
