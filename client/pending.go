package client

import (
	"context"
	"fmt"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/toolgate/toolgate/workflows"
)

// PendingCall is one call waiting for a decision, in some run.
type PendingCall struct {
	RunID string `json:"run"`
	// Policy: the run is under the worker's approval policy, so a decision
	// on this call must be signed (state.policy).
	Policy bool `json:"policy,omitempty"`
	// Goal is the run's goal.
	Goal string `json:"goal,omitempty"`
	workflows.Interrupt
}

// RunFailure is a run whose state could not be queried.
type RunFailure struct {
	RunID string `json:"run"`
	Error string `json:"error"`
}

// PendingPage is one page of waiting calls across runs.
type PendingPage struct {
	Calls []PendingCall
	// Failed names the runs of this page whose state query failed (their
	// calls are missing here; every other run's are listed).
	Failed []RunFailure
	// Runs counts the runs listed on this page (queried or failed).
	Runs int
	// NextPageToken asks for the next page; empty on the last.
	NextPageToken []byte
}

// PendingOptions page through the runs waiting for a decision.
type PendingOptions struct {
	PageSize  int    // runs per page (0: the server's default)
	PageToken []byte // from the previous page
}

// Pending lists the calls waiting for a decision across runs, one page of
// runs at a time, newest first. With toolgate's search attributes it asks
// visibility for the waiting runs only; without them, every running AgentRun.
// A run whose state query fails does not hide the others: it is named in
// Failed. The error is for a failed listing.
func (c *Client) Pending(ctx context.Context, opts PendingOptions) (PendingPage, error) {
	all := fmt.Sprintf(`WorkflowType = %q AND ExecutionStatus = "Running"`, workflows.WorkflowName)
	waiting := all + fmt.Sprintf(` AND %s = %q`, workflows.SearchAttrStatus, workflows.StatusWaitingForApproval)
	req := &workflowservice.ListWorkflowExecutionsRequest{Query: waiting, PageSize: int32(opts.PageSize), NextPageToken: opts.PageToken}
	resp, err := c.tc.ListWorkflow(ctx, req)
	if err != nil {
		req.Query = all
		if resp, err = c.tc.ListWorkflow(ctx, req); err != nil {
			return PendingPage{}, fmt.Errorf("listing runs: %w", err)
		}
	}
	runs := resp.GetExecutions()
	page := PendingPage{Calls: []PendingCall{}, Runs: len(runs), NextPageToken: resp.GetNextPageToken()}
	for _, e := range runs {
		id := e.GetExecution().GetWorkflowId()
		st, err := c.State(ctx, id)
		if err != nil {
			page.Failed = append(page.Failed, RunFailure{RunID: id, Error: err.Error()})
			continue
		}
		for _, it := range st.Interrupts {
			page.Calls = append(page.Calls, PendingCall{RunID: id, Policy: st.Policy, Goal: st.Goal, Interrupt: it})
		}
	}
	return page, nil
}

// AllPending is Pending over every page. Its error is for a failed listing,
// or when runs were found and none of them could be queried.
func (c *Client) AllPending(ctx context.Context) (PendingPage, error) {
	all := PendingPage{Calls: []PendingCall{}}
	opts := PendingOptions{}
	for {
		page, err := c.Pending(ctx, opts)
		if err != nil {
			return all, err
		}
		all.Calls = append(all.Calls, page.Calls...)
		all.Failed = append(all.Failed, page.Failed...)
		all.Runs += page.Runs
		if len(page.NextPageToken) == 0 {
			break
		}
		opts.PageToken = page.NextPageToken
	}
	if all.Runs > 0 && len(all.Failed) == all.Runs {
		return all, fmt.Errorf("none of the %d runs found could be queried (is a toolgate worker running on their task queue?)", all.Runs)
	}
	return all, nil
}
