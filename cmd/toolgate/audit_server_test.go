package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/workflows"
)

// `toolgate audit --server`, as a person (no credential), against `toolgate
// dev`: a run its worker ran passes, with the authority namespace; once a
// person resets that run — which any client of the runs may do — the audit
// names the reset (no worker's record covers it, a person made it) and
// exits 1.
func TestAuditServerNamesAResetNoRecordCovers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	address, _ := startDev(t, ctx)
	tc, _, err := connect.Dial(ctx, connect.Settings{Address: address, Isolated: true}, func(o *client.Options) {
		o.Logger = sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	})
	require.NoError(t, err)
	defer tc.Close()
	var in workflows.RunInput
	require.NoError(t, json.Unmarshal([]byte(`{"goal":"search","planner":{"kind":"scripted","answer":"found it",
		"turns":[[{"tool":"search_tickets","args":{"query":"login"}}]]}}`), &in))
	tg := tgclient.New(tc)
	const id = "cli-audit"
	_, err = tg.Start(ctx, id, in)
	require.NoError(t, err)
	res, err := tg.Result(ctx, id)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusCompleted, res.Status, "%+v", res)

	out, errOut, err := runCLI("audit", "--server", "--address", address)
	require.NoError(t, err, "%s\n%s", out, errOut)
	assert.Contains(t, out, "3 events checked for who wrote them (workflow tasks answered, activities closed, resets, terminations): each by a worker or the server\n")
	assert.Contains(t, out, "total: 0 decisions in 1 run, ")
	assert.Contains(t, out, "authority namespace default-authority: 0 executions read\nnothing was written there yet")

	// A person resets the run to its first workflow task's end.
	resp, err := tc.WorkflowService().ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace: "default", WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id}, Reason: "a person's reset",
		WorkflowTaskFinishEventId: 4, RequestId: "cli-audit-reset"})
	require.NoError(t, err)
	_, err = tg.Result(ctx, id)
	require.NoError(t, err)

	out, _, err = runCLI("audit", "--server", "--address", address, id)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "audit failed: 1 event written by neither a worker nor the server")
	assert.Contains(t, out, id+"/"+resp.GetRunId()+": run "+id+"\n")
	assert.Contains(t, out, "no worker's record covers it: its reason names no reset id")
	assert.Contains(t, out, `by person "anonymous", neither a worker nor the server: the run had no policy, so no signed rewind can vouch for it`)
	assert.Contains(t, out, "total: 1 decision in 2 runs, 1 not verified; ")

	_, _, err = runCLI("audit", "--server", "--address", address, "no-such-run")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "audit: 1 of 1 runs could not be read")
}
