package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// waitingQuery is the visibility query of the approvals inbox.
var waitingQuery = fmt.Sprintf(`%s="%s"`, workflows.SearchAttrStatus, workflows.StatusWaitingForApproval)

// list runs a visibility query and returns the workflow ids it finds, sorted,
// with each run's ToolgatePendingTools as visibility has it.
func list(ctx context.Context, cl client.Client, query string) ([]string, map[string][]string, error) {
	resp, err := cl.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
	if err != nil {
		return nil, nil, err
	}
	var ids []string
	tools := map[string][]string{}
	for _, e := range resp.GetExecutions() {
		id := e.GetExecution().GetWorkflowId()
		ids = append(ids, id)
		if p := e.GetSearchAttributes().GetIndexedFields()[workflows.SearchAttrPendingTools]; p != nil {
			var v []string
			if err := converter.GetDefaultDataConverter().FromPayload(p, &v); err != nil {
				return nil, nil, fmt.Errorf("%s of %s: %w", workflows.SearchAttrPendingTools, id, err)
			}
			tools[id] = v
		}
	}
	slices.Sort(ids)
	return ids, tools, nil
}

// visibilityFinds waits (visibility is eventually consistent) until query
// finds exactly want, and returns the pending tools of what it found.
func visibilityFinds(t *testing.T, cl client.Client, query string, want ...string) map[string][]string {
	t.Helper()
	slices.Sort(want)
	var tools map[string][]string
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("visibility finding %q for %s", want, query), func() error {
		ids, tt, err := list(context.Background(), cl, query)
		if err != nil {
			return err
		}
		if !slices.Equal(ids, want) {
			return fmt.Errorf("%s finds %q, want %q", query, ids, want)
		}
		tools = tt
		return nil
	})
	return tools
}

// workflowMetadataQuery is the SDK's built-in query for a run's metadata
// (internal.QueryTypeWorkflowMetadata in the Go SDK; not exported by v1.50.0).
const workflowMetadataQuery = "__temporal_workflow_metadata"

// currentDetails reads what the Temporal UI shows as a run's current details
// (set with workflow.SetCurrentDetails). The server keeps no copy of them:
// the UI, like this, asks the run with the built-in workflowMetadataQuery.
func currentDetails(t *testing.T, cl client.Client, id string) string {
	t.Helper()
	v, err := cl.QueryWorkflow(context.Background(), id, "", workflowMetadataQuery)
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	return md.GetCurrentDetails()
}

// pendingItem is one line of `toolgate pending --json`.
type pendingItem struct {
	Run        string          `json:"run"`
	CallID     string          `json:"call_id"`
	Tool       string          `json:"tool"`
	CallArgs   json.RawMessage `json:"call_args"`
	ArgsDigest string          `json:"args_digest"`
	Kind       string          `json:"kind"`
}

// pendingCLI waits until `toolgate pending --json` lists exactly want
// ("run call tool" each), and returns its items.
func pendingCLI(t *testing.T, address string, want ...string) []pendingItem {
	t.Helper()
	slices.Sort(want)
	var items []pendingItem
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("toolgate pending listing %q", want), func() error {
		res := toolgate(t, "pending", "--json", "--address", address)
		if res.code != 0 {
			return fmt.Errorf("toolgate pending: exit %d: %s", res.code, res.stderr)
		}
		items = nil
		if err := json.Unmarshal([]byte(res.stdout), &items); err != nil {
			return fmt.Errorf("toolgate pending --json printed %q: %w", res.stdout, err)
		}
		var got []string
		for _, it := range items {
			got = append(got, it.Run+" "+it.CallID+" "+it.Tool)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("toolgate pending lists %q, want %q", got, want)
		}
		return nil
	})
	return items
}

// TestInboxAcrossRuns: three runs on one server, two waiting for approval
// and one completed. Visibility, `toolgate pending` and the UI's details all
// show exactly the two waiting runs and what they wait for; approving one with
// `toolgate approve` takes it out of the inbox and lets it finish.
func TestInboxAcrossRuns(t *testing.T) {
	srv, cl := startServer(t, nil)
	startWorker(t, cl, true)
	ctx := context.Background()

	closeRun := startRun(t, cl, "inbox-close", seedRun())
	refundIn := workflows.RunInput{Goal: "refund Grace", Planner: plan.Config{Kind: plan.KindScripted,
		Turns: [][]tool.Proposal{{proposal("refund", `{"booking_id":"BK-2","amount_cents":15000}`)}}, Answer: "refunded"}}
	startRun(t, cl, "inbox-refund", refundIn)
	doneRun := startRun(t, cl, "inbox-done", workflows.RunInput{Goal: "find the login ticket",
		Planner: plan.Config{Kind: plan.KindScripted, Turns: [][]tool.Proposal{{searchLogin}, {searchLogin}}, Answer: "found"}})

	require.Equal(t, workflows.StatusCompleted, result(t, doneRun).Status)
	closeWait := waitPending(t, cl, "inbox-close", "c-3")
	refundWait := waitPending(t, cl, "inbox-refund", "c-1")
	require.Equal(t, "close_ticket", closeWait.Tool)
	require.Equal(t, "refund", refundWait.Tool)

	// Visibility: the inbox query finds exactly the two waiting runs, each
	// with the tool it waits for in ToolgatePendingTools.
	tools := visibilityFinds(t, cl, waitingQuery, "inbox-close", "inbox-refund")
	require.Equal(t, []string{"close_ticket"}, tools["inbox-close"])
	require.Equal(t, []string{"refund"}, tools["inbox-refund"])
	visibilityFinds(t, cl, fmt.Sprintf(`%s="close_ticket"`, workflows.SearchAttrPendingTools), "inbox-close")
	visibilityFinds(t, cl, fmt.Sprintf(`%s="%s"`, workflows.SearchAttrStatus, workflows.StatusCompleted), "inbox-done")

	// The same values on the runs themselves (not visibility).
	desc, err := cl.DescribeWorkflow(ctx, "inbox-close", "")
	require.NoError(t, err)
	status, _ := desc.TypedSearchAttributes.GetKeyword(temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrStatus))
	require.Equal(t, workflows.StatusWaitingForApproval, status)
	pendingTools, _ := desc.TypedSearchAttributes.GetKeywordList(temporal.NewSearchAttributeKeyKeywordList(workflows.SearchAttrPendingTools))
	require.Equal(t, []string{"close_ticket"}, pendingTools)

	// What the Temporal UI shows for each run.
	require.Equal(t, `waiting for approval: close_ticket {"ticket_id":"TKT-3"} gate (c-3)`, currentDetails(t, cl, "inbox-close"))
	require.Equal(t, `waiting for approval: refund {"amount_cents":15000,"booking_id":"BK-2"} gate (c-1)`, currentDetails(t, cl, "inbox-refund"))
	require.Equal(t, workflows.StatusCompleted, currentDetails(t, cl, "inbox-done"))
	// DescribeWorkflowExecution does not carry them: its user metadata holds
	// only the static summary and details given at start (none here).
	raw, err := cl.DescribeWorkflowExecution(ctx, "inbox-close", "")
	require.NoError(t, err)
	require.Nil(t, raw.GetExecutionConfig().GetUserMetadata().GetDetails())

	// The operator's inbox: exactly the two waiting calls, with their
	// arguments and digests.
	items := pendingCLI(t, srv.Address(), "inbox-close c-3 close_ticket", "inbox-refund c-1 refund")
	for _, it := range items {
		want := map[string]workflows.Interrupt{"inbox-close": closeWait, "inbox-refund": refundWait}[it.Run]
		require.JSONEq(t, string(want.CallArgs), string(it.CallArgs))
		require.Equal(t, want.ArgsDigest, it.ArgsDigest)
		require.Equal(t, string(workflows.KindGate), it.Kind)
	}

	// Approve one from the command line.
	res := toolgate(t, "approve", "inbox-close", "c-3", "--address", srv.Address(), "--as", "op")
	require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	require.Contains(t, res.stdout, "approved c-3 (close_ticket) by op")

	closed := result(t, closeRun)
	require.Equal(t, workflows.StatusCompleted, closed.Status)
	var approvedBy []string
	for _, r := range closed.Trace {
		if r.CallID == "c-3" && r.Status == workflows.TraceApproved {
			approvedBy = append(approvedBy, r.Approver)
		}
	}
	require.Equal(t, []string{"op"}, approvedBy)

	// Now only the refund waits.
	tools = visibilityFinds(t, cl, waitingQuery, "inbox-refund")
	require.Equal(t, []string{"refund"}, tools["inbox-refund"])
	visibilityFinds(t, cl, fmt.Sprintf(`%s="close_ticket"`, workflows.SearchAttrPendingTools))
	visibilityFinds(t, cl, fmt.Sprintf(`%s="%s"`, workflows.SearchAttrStatus, workflows.StatusCompleted), "inbox-close", "inbox-done")
	pendingCLI(t, srv.Address(), "inbox-refund c-1 refund")
	require.Equal(t, workflows.StatusCompleted, currentDetails(t, cl, "inbox-close"))
}
