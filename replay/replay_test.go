package replay_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/nexusserve"
	"github.com/toolgate/toolgate/replay"
	"github.com/toolgate/toolgate/workflows"
)

// histories are the recorded fixtures (go run ./testsuite/histories/record).
const histories = "../testsuite/histories"

// flows are the fixtures that must be there: one per recorded flow, at a
// rules version this build runs (workflows.Versions). The fixtures of
// retired versions are under retired/ (TestRetiredHistoriesAreRefused).
var flows = []string{
	// the fleet ledger keeping its pauses in its memo (ledger-pause-memo)
	"ledger_v14",
	"ledger_v10", "ledger_v12", // the fleet ledger's histories of before (its own change ids)
	"nexus_call_v10", "nexus_withdrawn_v10", // the workflows behind two Nexus call operations, before call-told
	// rules version 15: the run tells a call's waiter; the call workflow
	// (call-told 1) waits for that word instead of watching
	"nexus_v15", "nexus_call_v15", "nexus_withdrawn_v15",
	// the fleet ledger with leases (ledger-page 1: it continues as new
	// within one page of history) and the run whose calls it counted
	"guarded_v15", "ledger_v15",
	// the ledgers sharded per guard (ledger-shards 1): the task queue's,
	// which keeps the pauses, and the budget's, which counts it
	"guarded_v15_shards", "ledger_v15_shards", "ledger_guard_v15_shards",
	// rules version 16: every flow again, recorded when versions 1 to 13
	// retired (issue #47); a rejected call's scripted answer says what did
	// not run
	"reject_v16", "cache_hit_v16", "approve_v16", "expire_v16", "deny_v16", "interrupt_v16", "retry_fallback_v16",
	"parallel_v16", "continue_as_new_v16_first", "continue_as_new_v16_last", "message_v16", "support_planner_v16",
	"policy_rule_v16", "policy_quorum_v16", "policy_edit_v16", "park_v16_first", "park_v16_last", "outcomes_v16",
	"external_v16", "remote_v16", "notified_v16", "rewound_v16", "forked_v16",
	// rules version 17: a guarded call whose tool's question parked, rejected
	// in the next run, is settled with the fleet ledger there
	"guarded_park_v17_first", "guarded_park_v17_last",
}

// retired holds the fixtures of rules versions this build no longer runs.
var retired = filepath.Join(histories, "retired")

// allFiles are every recorded history: AgentRun's and the fleet ledger's.
func allFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(histories, "*.json"))
	require.NoError(t, err)
	for _, f := range flows {
		require.FileExists(t, filepath.Join(histories, f+".json"))
	}
	return files
}

// workflowType is the workflow type a history's first event names.
func workflowType(t *testing.T, file string) string {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	return h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName()
}

// filesOf are the recorded histories of one workflow type.
func filesOf(t *testing.T, wfType string) []string {
	t.Helper()
	var out []string
	for _, f := range allFiles(t) {
		if workflowType(t, f) == wfType {
			out = append(out, f)
		}
	}
	require.NotEmpty(t, out, "no %s history", wfType)
	return out
}

// historyFiles are the recorded AgentRun histories.
func historyFiles(t *testing.T) []string {
	t.Helper()
	return filesOf(t, workflows.WorkflowName)
}

// callFiles are the recorded histories of the workflow behind a Nexus call.
func callFiles(t *testing.T) []string {
	t.Helper()
	return filesOf(t, nexusserve.CallWorkflow)
}

// ledgerFiles are the recorded histories of the fleet ledger.
func ledgerFiles(t *testing.T) []string {
	t.Helper()
	return filesOf(t, ledger.WorkflowName)
}

// TestHistoriesReplay: every recorded history replays against the current
// AgentRun. A failure here means a change to the workflow code would break
// runs in flight: guard it with workflow.GetVersion.
func TestHistoriesReplay(t *testing.T) {
	files := allFiles(t)
	require.Equal(t, len(files), len(historyFiles(t))+len(ledgerFiles(t))+len(callFiles(t)), "every history is AgentRun's, the ledger's or a Nexus call's")
	require.NoError(t, replay.Dir(histories))
}

// TestRetiredHistoriesAreRefused: every history of a retired rules version
// is refused as such (replay.ErrRetired), its error the worker's plain
// words: the run's version, the versions this build runs, the build that
// runs it — never a nondeterminism, never a stack trace.
func TestRetiredHistoriesAreRefused(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(retired, "*.json"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 50)
	v := workflows.Versions()
	for _, f := range files {
		err := replay.File(f)
		require.Error(t, err, "%s replayed, but its rules version is retired", f)
		requireKind(t, err, replay.ErrRetired)
		msg := err.Error()
		require.Contains(t, msg, fmt.Sprintf("this build runs rules versions %d to %d", v.Oldest, v.Current), f)
		require.Contains(t, msg, v.RetiredBuild, f)
		require.NotContains(t, msg, "goroutine", "%s: the refusal carries a stack trace", f)
		require.NotContains(t, msg, nondeterminism, f)
	}
	t.Logf("%d retired histories refused; one says: %v", len(files), replay.File(files[0]))
}

// TestFileWithAgentRun: FileWith with the current AgentRun is File, for
// the ledger's histories too (they replay against ledger.Ledger).
func TestFileWithAgentRun(t *testing.T) {
	for _, f := range allFiles(t) {
		require.NoError(t, replay.FileWith(f, workflows.AgentRun), f)
		require.NoError(t, replay.File(f), f)
	}
}

// extraStep is an incompatible change: a timer before everything AgentRun
// does. Runs recorded without it cannot replay.
func extraStep(ctx workflow.Context, in workflows.RunInput) (workflows.RunResult, error) {
	if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
		return workflows.RunResult{}, err
	}
	return workflows.AgentRun(ctx, in)
}

// extraStepVersioned is the same change made safely: runs recorded before it
// take the DefaultVersion branch (no timer) on replay; new runs get the timer.
func extraStepVersioned(ctx workflow.Context, in workflows.RunInput) (workflows.RunResult, error) {
	if workflow.GetVersion(ctx, "extra-step", workflow.DefaultVersion, 1) == 1 {
		if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
			return workflows.RunResult{}, err
		}
	}
	return workflows.AgentRun(ctx, in)
}

// extraLocalActivity is another incompatible change: an extra local activity first.
func extraLocalActivity(ctx workflow.Context, in workflows.RunInput) (workflows.RunResult, error) {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Second})
	if err := workflow.ExecuteLocalActivity(lctx, func() (string, error) { return "extra", nil }).Get(lctx, nil); err != nil {
		return workflows.RunResult{}, err
	}
	return workflows.AgentRun(ctx, in)
}

// nondeterminism is the code the SDK gives every nondeterminism error
// ("[TMPRL1100] nondeterministic workflow: …", "[TMPRL1100] code executed
// local activity …, but history event found …", "[TMPRL1100] lookup failed
// for scheduledEventID …"): which message comes depends on where the replay
// first diverges from the history.
const nondeterminism = "[TMPRL1100]"

// TestIncompatibleChangeIsCaught: every recorded history fails to replay
// against AgentRun with an unversioned extra step, and the error says why.
func TestIncompatibleChangeIsCaught(t *testing.T) {
	for name, wf := range map[string]any{"timer": extraStep, "local activity": extraLocalActivity} {
		t.Run(name, func(t *testing.T) {
			for _, f := range historyFiles(t) {
				err := replay.FileWith(f, wf)
				require.Error(t, err, "%s replayed against an incompatible change", f)
				require.Contains(t, err.Error(), nondeterminism, f)
				requireKind(t, err, replay.ErrNondeterministic)
				t.Logf("%s: %v", filepath.Base(f), err)
				require.Contains(t, err.Error(), filepath.Base(f), "the error names the file")
			}
			err := replay.DirWith(histories, wf)
			require.Error(t, err)
			require.Equal(t, len(historyFiles(t)), strings.Count(err.Error(), nondeterminism),
				"DirWith reports every failing history (and no ledger's or Nexus call's: AgentRun's change is not theirs): %v", err)
		})
	}
}

// TestVersionedChangeReplays: the same change behind workflow.GetVersion
// replays every recorded history.
func TestVersionedChangeReplays(t *testing.T) {
	historyFiles(t)
	require.NoError(t, replay.DirWith(histories, extraStepVersioned))
}
