// Package replay replays recorded AgentRun histories against the current
// workflow code, so a change that would break runs in flight is caught before
// it ships. A history of the fleet ledger (workflow type ledger.WorkflowName,
// package ledger) replays against ledger.Ledger, picked by the workflow type
// the history starts with, and one of the workflow behind a Nexus call
// operation (nexusserve.CallWorkflow) against nexusserve.Call. Use it in
// your own tests:
//
//	func TestMyHistoriesReplay(t *testing.T) {
//		if err := replay.Dir("testdata/histories"); err != nil {
//			t.Fatal(err)
//		}
//	}
//
// To check a change before making it, replay with your variant of the
// workflow registered as AgentRun (FileWith, DirWith; WithLedger for the
// ledger's): guarded with
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
	"strings"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/encryption"
	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/nexusserve"
	"github.com/toolgate/toolgate/workflows"
)

// Kinds of a failed replay (an *Error); test with errors.Is.
var (
	// ErrUnreadable: the history file cannot be read (missing, not
	// readable), or it is not a history exported as JSON.
	ErrUnreadable = errors.New("history file unreadable")
	// ErrNeedsKey: the history's payloads are encrypted and no keyring was
	// given (WithKeyring; the CLI's --encryption-key-file).
	ErrNeedsKey = errors.New("encrypted history: no key given")
	// ErrWrongKey: the keyring given does not decrypt the history's payloads
	// (it lacks the key they name, or holds another key of that id).
	ErrWrongKey = errors.New("the key does not decrypt the history")
	// ErrNondeterministic: the history does not replay against the workflow
	// code, which changed incompatibly (guard the change with
	// workflow.GetVersion).
	ErrNondeterministic = errors.New("nondeterministic")
	// ErrRetired: the history is of a run started under a rules version
	// this build no longer runs (workflows.RetiredMessage): replay it with
	// a build that runs it (docs/versions.md).
	ErrRetired = errors.New("retired rules version")
	// ErrReplayFailed: the replay failed otherwise (the workflow panicked,
	// say): not shown to be a nondeterminism.
	ErrReplayFailed = errors.New("replay failed")
)

// Error is a failed replay of one history file: Kind is one of the Err*
// values (errors.Is), Err the cause (errors.As reaches it: an
// *fs.PathError, an *encryption.MissingKeyError, the SDK's error).
type Error struct {
	Path string
	Kind error
	Err  error
}

func (e *Error) Error() string { return "replaying " + e.Path + ": " + e.Err.Error() }

// Unwrap is the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is says whether target is the failure's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Option configures a replay.
type Option func(*options)

type options struct {
	keyring *encryption.Keyring
	ledger  any
	call    any
}

// WithKeyring decrypts the payloads of histories written by workers with an
// encryption key file (package encryption) before replaying them. A history
// with a payload under a key k lacks, or any encrypted payload when no
// keyring is given, is refused before it is replayed, naming the key.
func WithKeyring(k *encryption.Keyring) Option { return func(o *options) { o.keyring = k } }

// WithLedger replays the fleet ledger's histories (workflow type
// ledger.WorkflowName) against wf in place of ledger.Ledger. wf must have
// ledger.Ledger's signature, func(workflow.Context, ledger.Input) error:
// typically a changed copy of it, or a function that adds a step and then
// calls ledger.Ledger.
func WithLedger(wf any) Option { return func(o *options) { o.ledger = wf } }

// WithNexusCall replays the histories of the workflow behind a Nexus call
// operation (workflow type nexusserve.CallWorkflow) against wf in place of
// nexusserve.Call, whose signature wf must have.
func WithNexusCall(wf any) Option { return func(o *options) { o.call = wf } }

// File replays one history exported as JSON (`temporal workflow show
// --output json`, or the files under testsuite/histories) against
// workflows.AgentRun, or, a history of the fleet ledger (workflow type
// ledger.WorkflowName), against ledger.Ledger, and one of a Nexus call's
// workflow against nexusserve.Call.
func File(path string, opts ...Option) error {
	return FileWith(path, workflows.AgentRun, opts...)
}

// FileWith replays one history against wf, registered under the workflow
// type AgentRun in place of workflows.AgentRun. wf must have AgentRun's
// signature, func(workflow.Context, workflows.RunInput) (workflows.RunResult,
// error); typically it is a changed copy of AgentRun, or a function that adds
// a step and then calls workflows.AgentRun. A history of the fleet ledger
// replays against ledger.Ledger (or WithLedger's workflow), and one of a
// Nexus call's workflow against nexusserve.Call (or WithNexusCall's), not
// wf: the workflow type its first event names picks the workflow.
func FileWith(path string, wf any, opts ...Option) error {
	o := options{ledger: ledger.Ledger, call: nexusserve.Call}
	for _, f := range opts {
		f(&o)
	}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: workflows.WorkflowName})
	r.RegisterWorkflowWithOptions(o.ledger, workflow.RegisterOptions{Name: ledger.WorkflowName})
	r.RegisterWorkflowWithOptions(o.call, workflow.RegisterOptions{Name: nexusserve.CallWorkflow})
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	f, err := os.Open(path)
	if err != nil {
		return &Error{Path: path, Kind: ErrUnreadable, Err: fmt.Errorf("cannot read the history file: %w", err)}
	}
	defer f.Close()
	hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		return &Error{Path: path, Kind: ErrUnreadable, Err: fmt.Errorf("not a history exported as JSON (%s): %w", exportHint, err)}
	}
	if len(hist.GetEvents()) == 0 {
		return &Error{Path: path, Kind: ErrUnreadable, Err: fmt.Errorf("no events: not a history exported as JSON (%s)", exportHint)}
	}
	if kind, err := decrypt(hist, o.keyring); err != nil {
		return &Error{Path: path, Kind: kind, Err: err}
	}
	// Replay under the run's own workflow id (the replayer's default is
	// "ReplayId"): a run under a policy checks that each signed token names
	// its workflow id, and would refuse on replay what it took when it ran.
	var ro worker.ReplayWorkflowHistoryOptions
	if evs := hist.GetEvents(); len(evs) > 0 {
		ro.OriginalExecution.ID = evs[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowId()
	}
	// A fleet ledger's history is taken while it runs (it never closes but
	// to continue as new), between its workflow tasks: the replayer checks
	// it up to its last event.
	if err := r.ReplayWorkflowHistoryWithOptions(logger, hist, ro); err != nil {
		if msg, ok := workflows.RetiredIn(err.Error()); ok {
			return &Error{Path: path, Kind: ErrRetired, Err: &causeError{err: err, msg: msg}}
		}
		kind := ErrReplayFailed
		if nondeterministic(err) {
			kind = ErrNondeterministic
		}
		return &Error{Path: path, Kind: kind, Err: err}
	}
	return nil
}

// exportHint says how a history is exported as JSON.
const exportHint = "temporal workflow show --workflow-id ID --output json > FILE"

// decrypt decrypts hist's payloads with k. A history with encrypted
// payloads and no k is ErrNeedsKey; one whose payloads k does not decrypt,
// ErrWrongKey.
func decrypt(hist *historypb.History, k *encryption.Keyring) (kind, err error) {
	if k == nil {
		if ids := encryption.KeyIDs(hist); len(ids) > 0 {
			return ErrNeedsKey, fmt.Errorf("its payloads are encrypted (key %s): pass --encryption-key-file FILE, "+
				"the key file of the workers that wrote it (WithKeyring in Go)", text.Clip(strings.Join(ids, ", "), 300))
		}
		return nil, nil
	}
	if err := encryption.DecodeHistory(context.Background(), hist, k); err != nil {
		why := err.Error()
		var missing *encryption.MissingKeyError
		if errors.As(err, &missing) {
			why = fmt.Sprintf("they are encrypted with key %s, which it lacks", text.Clip(missing.ID, 100))
		}
		return ErrWrongKey, &causeError{err: err, msg: fmt.Sprintf("the key file %s does not decrypt these payloads (%s): "+
			"pass the key file of the workers that wrote them", k.Path(), why)}
	}
	return nil, nil
}

// causeError says msg, and unwraps to err.
type causeError struct {
	msg string
	err error
}

func (e *causeError) Error() string { return e.msg }
func (e *causeError) Unwrap() error { return e.err }

// nondeterminism is the code the SDK gives every nondeterminism error
// ("[TMPRL1100] nondeterministic workflow: …").
const nondeterminism = "[TMPRL1100]"

// nondeterministic says whether a replay's error is the workflow code's
// not matching the history: a nondeterminism error, or a replay that ends
// otherwise than the history did.
func nondeterministic(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, nondeterminism) || strings.Contains(msg, "doesn't return the same result as the last event")
}

// Dir replays every *.json history in dir against workflows.AgentRun (a
// fleet ledger's against ledger.Ledger). It replays them all and reports
// every one that fails.
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
