// Package replay replays recorded AgentRun histories against the current
// workflow code, so a change that would break runs in flight is caught before
// it ships. Use it in your own tests:
//
//	func TestMyHistoriesReplay(t *testing.T) {
//		if err := replay.Dir("testdata/histories"); err != nil {
//			t.Fatal(err)
//		}
//	}
//
// To check a change before making it, replay with your variant of the
// workflow registered as AgentRun (FileWith, DirWith): guarded with
// workflow.GetVersion it replays; unguarded it fails with a nondeterminism
// error ("[TMPRL1100] nondeterministic workflow: …").
//
// The histories are JSON as `temporal workflow show --workflow-id ID --output
// json` writes them (protojson of history.v1.History; payloads not in
// shorthand). Export runs that have closed: a history cut while a workflow task
// is in flight may not replay (sdk-go #1670).
package replay

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/workflows"
)

// File replays one history exported as JSON (`temporal workflow show
// --output json`, or the files under testsuite/histories) against
// workflows.AgentRun.
func File(path string) error {
	return FileWith(path, workflows.AgentRun)
}

// FileWith replays one history against wf, registered under the workflow
// type AgentRun in place of workflows.AgentRun. wf must have AgentRun's
// signature, func(workflow.Context, workflows.RunInput) (workflows.RunResult,
// error); typically it is a changed copy of AgentRun, or a function that adds
// a step and then calls workflows.AgentRun.
func FileWith(path string, wf any) error {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: workflows.WorkflowName})
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("replaying %s: %w", path, err)
	}
	defer f.Close()
	hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		return fmt.Errorf("replaying %s: %w", path, err)
	}
	// Replay under the run's own workflow id (the replayer's default is
	// "ReplayId"): a run under a policy checks that each signed token names
	// its workflow id, and would refuse on replay what it took when it ran.
	var opts worker.ReplayWorkflowHistoryOptions
	if evs := hist.GetEvents(); len(evs) > 0 {
		opts.OriginalExecution.ID = evs[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowId()
	}
	if err := r.ReplayWorkflowHistoryWithOptions(logger, hist, opts); err != nil {
		return fmt.Errorf("replaying %s: %w", path, err)
	}
	return nil
}

// Dir replays every *.json history in dir against workflows.AgentRun. It
// replays them all and reports every one that fails.
func Dir(dir string) error {
	return DirWith(dir, workflows.AgentRun)
}

// DirWith replays every *.json history in dir against wf (see FileWith). It
// replays them all and reports every one that fails.
func DirWith(dir string, wf any) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no *.json histories in %s", dir)
	}
	var errs []error
	for _, f := range files {
		if err := FileWith(f, wf); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
