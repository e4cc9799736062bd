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
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/encryption"
	"github.com/toolgate/toolgate/workflows"
)

// Option configures a replay.
type Option func(*options)

type options struct{ keyring *encryption.Keyring }

// WithKeyring decrypts the payloads of histories written by workers with an
// encryption key file (package encryption) before replaying them. A history
// with a payload under a key k lacks, or any encrypted payload when no
// keyring is given, is refused before it is replayed, naming the key.
func WithKeyring(k *encryption.Keyring) Option { return func(o *options) { o.keyring = k } }

// File replays one history exported as JSON (`temporal workflow show
// --output json`, or the files under testsuite/histories) against
// workflows.AgentRun.
func File(path string, opts ...Option) error {
	return FileWith(path, workflows.AgentRun, opts...)
}

// FileWith replays one history against wf, registered under the workflow
// type AgentRun in place of workflows.AgentRun. wf must have AgentRun's
// signature, func(workflow.Context, workflows.RunInput) (workflows.RunResult,
// error); typically it is a changed copy of AgentRun, or a function that adds
// a step and then calls workflows.AgentRun.
func FileWith(path string, wf any, opts ...Option) error {
	var o options
	for _, f := range opts {
		f(&o)
	}
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
	if err := encryption.Decrypt(context.Background(), hist, o.keyring); err != nil {
		return fmt.Errorf("replaying %s: %w", path, err)
	}
	// Replay under the run's own workflow id (the replayer's default is
	// "ReplayId"): a run under a policy checks that each signed token names
	// its workflow id, and would refuse on replay what it took when it ran.
	var ro worker.ReplayWorkflowHistoryOptions
	if evs := hist.GetEvents(); len(evs) > 0 {
		ro.OriginalExecution.ID = evs[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowId()
	}
	if err := r.ReplayWorkflowHistoryWithOptions(logger, hist, ro); err != nil {
		return fmt.Errorf("replaying %s: %w", path, err)
	}
	return nil
}

// Dir replays every *.json history in dir against workflows.AgentRun. It
// replays them all and reports every one that fails.
func Dir(dir string, opts ...Option) error {
	return DirWith(dir, workflows.AgentRun, opts...)
}

// DirWith replays every *.json history in dir against wf (see FileWith). It
// replays them all and reports every one that fails.
func DirWith(dir string, wf any, opts ...Option) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no *.json histories in %s", dir)
	}
	var errs []error
	for _, f := range files {
		if err := FileWith(f, wf, opts...); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
