package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/toolgate/toolgate/activities/desk"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
)

func TestOptionsAreTheDemoWorker(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	o, d, err := Options(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, o.Validate())
	require.NotEmpty(t, o.Tools)
	require.Equal(t, []string{plan.KindOpenAI, plan.KindSupport}, o.Config().Planners)
	require.FileExists(t, filepath.Join(dir, DeskFile))
	info, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "the data directory is private")
}

// ResetDesk gives the demo a desk of its own, at its seed however the last
// demo left it, and leaves the desk under DeskFile (toolgate dev's) alone.
func TestResetDeskIsTheDemosOwnAtItsSeed(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.Mkdir(dir, 0o700))
	dev, err := desk.Open(filepath.Join(dir, DeskFile))
	require.NoError(t, err)
	closeTKT3(t, dev, "dev/c-3")
	require.NoError(t, dev.Close())

	for i := range 2 {
		path, err := ResetDesk(ctx, dir)
		require.NoError(t, err)
		require.Equal(t, filepath.Join(dir, DemoDeskFile), path)
		o, d, err := OptionsWithDesk(dir, path)
		require.NoError(t, err)
		require.NotEmpty(t, o.Tools)
		tk, err := d.Ticket(ctx, "TKT-3")
		require.NoError(t, err)
		require.Equal(t, desk.StatusOpen, tk.Status, "demo %d finds TKT-3 open", i+1)
		closeTKT3(t, d, fmt.Sprintf("demo-%d/c-3", i)) // what the demo does
		require.NoError(t, d.Close())
	}

	dev, err = desk.Open(filepath.Join(dir, DeskFile))
	require.NoError(t, err)
	defer dev.Close()
	tk, err := dev.Ticket(ctx, "TKT-3")
	require.NoError(t, err)
	require.Equal(t, "dev/c-3", tk.ClosedBy, "the dev desk is as dev left it")
}

// closeTKT3 closes TKT-3 with close_ticket, run as a worker runs it, approved
// under idempotency key key.
func closeTKT3(t *testing.T, d *desk.Desk, key string) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	for _, tl := range d.Tools() {
		env.RegisterActivityWithOptions(tl.Run, activity.RegisterOptions{Name: tl.Spec.Name})
	}
	_, err := env.ExecuteActivity("close_ticket", tool.Request{CallID: "c-3", IdempotencyKey: key,
		Args: json.RawMessage(`{"ticket_id":"TKT-3"}`), Approval: &tool.Approval{Approver: "alice", Kind: tool.ApprovedAtGate}})
	require.NoError(t, err)
}
