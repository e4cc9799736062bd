package replay_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/nexusserve"
	"github.com/toolgate/toolgate/replay"
)

// The workflow behind a Nexus call operation (nexus_call_v10: watched until
// its call ran; nexus_withdrawn_v10: cancelled, its call withdrawn) replays
// against nexusserve.Call; a changed one is checked with WithNexusCall.

func callExtraStep(ctx workflow.Context, req nexusserve.CallRequest) (nexusserve.CallOutput, error) {
	if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
		return nexusserve.CallOutput{}, err
	}
	return nexusserve.Call(ctx, req)
}

func callExtraStepVersioned(ctx workflow.Context, req nexusserve.CallRequest) (nexusserve.CallOutput, error) {
	if workflow.GetVersion(ctx, "extra-step", workflow.DefaultVersion, 1) == 1 {
		if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
			return nexusserve.CallOutput{}, err
		}
	}
	return nexusserve.Call(ctx, req)
}

func TestNexusCallHistoriesReplay(t *testing.T) {
	files := callFiles(t)
	require.Len(t, files, 4, "the two call workflows, watching (v10) and told (v15)")
	for _, f := range files {
		require.NoError(t, replay.File(f), f)
		require.NoError(t, replay.File(f, replay.WithNexusCall(callExtraStepVersioned)), f)
		err := replay.File(f, replay.WithNexusCall(callExtraStep))
		require.Error(t, err, "%s replayed against an incompatible call workflow", f)
		require.Contains(t, err.Error(), nondeterminism, f)
		requireKind(t, err, replay.ErrNondeterministic)
		require.Contains(t, err.Error(), filepath.Base(f))
	}
}
