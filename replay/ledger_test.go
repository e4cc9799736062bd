package replay_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/replay"
)

// The fleet ledger's recorded histories (ledger_v10.json: the ledger of
// the guarded flow, taken between its workflow tasks) replay against
// ledger.Ledger, picked by their workflow type; a changed ledger is
// checked against them with WithLedger.

// ledgerExtraStep is an incompatible change to the ledger: a timer before
// everything it does.
func ledgerExtraStep(ctx workflow.Context, in ledger.Input) error {
	if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
		return err
	}
	return ledger.Ledger(ctx, in)
}

// ledgerExtraStepVersioned is the same change behind workflow.GetVersion.
func ledgerExtraStepVersioned(ctx workflow.Context, in ledger.Input) error {
	if workflow.GetVersion(ctx, "extra-step", workflow.DefaultVersion, 1) == 1 {
		if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
			return err
		}
	}
	return ledger.Ledger(ctx, in)
}

// TestLedgerHistoriesReplay: every ledger history replays with File (no
// option: the workflow type picks ledger.Ledger) and with WithLedger(ledger.Ledger).
func TestLedgerHistoriesReplay(t *testing.T) {
	for _, f := range ledgerFiles(t) {
		require.NoError(t, replay.File(f), f)
		require.NoError(t, replay.File(f, replay.WithLedger(ledger.Ledger)), f)
	}
}

// TestLedgerIncompatibleChangeIsCaught: a ledger history fails to replay
// against a ledger with an unversioned extra step, and says so; the same
// change behind GetVersion replays. AgentRun's histories are not replayed
// against the ledger's variant.
func TestLedgerIncompatibleChangeIsCaught(t *testing.T) {
	for _, f := range ledgerFiles(t) {
		err := replay.File(f, replay.WithLedger(ledgerExtraStep))
		require.Error(t, err, "%s replayed against an incompatible ledger", f)
		require.Contains(t, err.Error(), nondeterminism, f)
		requireKind(t, err, replay.ErrNondeterministic)
		require.Contains(t, err.Error(), filepath.Base(f), "the error names the file")
		t.Logf("%s: %v", filepath.Base(f), err)
		require.NoError(t, replay.File(f, replay.WithLedger(ledgerExtraStepVersioned)), f)
	}
	err := replay.Dir(histories, replay.WithLedger(ledgerExtraStep))
	require.Error(t, err)
	require.Equal(t, len(ledgerFiles(t)), strings.Count(err.Error(), nondeterminism), "only the ledger's histories fail: %v", err)
}
