package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// This file keeps a ledger from being wiped: a ledger whose last run closed
// otherwise than by continuing as new (terminated by someone, say) is never
// replaced by an empty one. The run started anew reads the closed run's
// state (the state query, answered by a worker replaying its history)
// before it answers anyone; until it has, every reservation waits, and a
// run whose reservation is not answered refuses its call (fails closed).

// recoverChange versions the recovery in the ledger's own history (a
// ledger recorded before it starts with no local activity).
const recoverChange = "ledger-recover"

// Recovery is what RecoverActivity found: the state of the ledger's last
// closed run (From), or nothing (a ledger that never ran before).
type Recovery struct {
	From   string `json:"from,omitempty"`   // the run id read
	Status string `json:"status,omitempty"` // how it closed
	State  *State `json:"state,omitempty"`
	// Home: State is the home ledger's (RecoverRequest.Home), read by a
	// guard's ledger that never ran before.
	Home bool `json:"home,omitempty"`
}

// RecoverRequest names the ledger run that recovers (its own run, which
// the listing skips). Home, for a guard's ledger (shard.go), is the task
// queue's ledger, whose state it starts from when it never ran before.
type RecoverRequest struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Home       string `json:"home,omitempty"`
}

// recoverState runs RecoverActivity when this run is a fresh start of the
// ledger (no continue-as-new brought it), and returns the state to begin
// with. The local activity retries until it can read the closed run: no
// reservation is answered meanwhile.
func recoverState(ctx workflow.Context, r role, guard string) (*State, error) {
	info := workflow.GetInfo(ctx)
	if info.ContinuedExecutionRunID != "" {
		return nil, nil
	}
	if workflow.GetVersion(ctx, recoverChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil, nil
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	var rec Recovery
	req := RecoverRequest{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID}
	if r == countsGuard {
		req.Home = ID(info.TaskQueueName)
	}
	if err := workflow.ExecuteLocalActivity(lctx, RecoverActivity, req).Get(ctx, &rec); err != nil {
		return nil, fmt.Errorf("toolgate ledger: reading the state of its last run: %w", err)
	}
	if rec.State == nil {
		return nil, nil
	}
	if rec.Home {
		st := stateOf(*rec.State, guard)
		workflow.GetLogger(ctx).Info("toolgate ledger: a guard's ledger starts from what the task queue's ledger counted of it",
			"guard", guard, "from", rec.From, "entries", len(st.Entries), "leases", len(st.Leases))
		return &st, nil
	}
	if r == countsGuard { // a guard's ledger keeps its guard, nothing else
		*rec.State = stateOf(*rec.State, guard)
	}
	workflow.GetLogger(ctx).Warn("toolgate ledger: its last run closed without continuing as new; this run goes on from its state",
		"from", rec.From, "status", rec.Status, "entries", len(rec.State.Entries), "pauses", len(rec.State.Pauses))
	workflow.GetMetricsHandler(ctx).Counter("toolgate_ledger_recovered").Inc(1)
	st := bounded(*rec.State)
	return &st, nil
}

// recoverActivity is RecoverActivity: it finds the ledger's last run that
// closed (other than req's own) and, unless it continued as new, asks it
// for its state.
func recoverActivity(ctx context.Context, req RecoverRequest) (Recovery, error) {
	c := activity.GetClient(ctx)
	if c == nil {
		return Recovery{}, errors.New("no Temporal client in this activity's context")
	}
	last, err := lastClosed(ctx, c, activity.GetInfo(ctx).Namespace, req)
	if err != nil {
		return Recovery{}, err
	}
	if last == nil {
		if req.Home == "" {
			return Recovery{}, nil
		}
		return fromHome(ctx, c, req.Home)
	}
	status := last.GetStatus()
	rec := Recovery{From: last.GetExecution().GetRunId(), Status: status.String()}
	if status == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
		// Its next run is closed too, and not listed yet: ask again.
		return rec, fmt.Errorf("the ledger's last listed run %s continued as new and its next run is not listed yet", rec.From)
	}
	res, err := c.QueryWorkflow(ctx, req.WorkflowID, rec.From, QueryState)
	if err != nil {
		return rec, fmt.Errorf("asking the ledger's last run %s (%s) for its state: %w", rec.From, rec.Status, err)
	}
	var st State
	if err := res.Get(&st); err != nil {
		return rec, fmt.Errorf("decoding the state of the ledger's last run %s: %w", rec.From, err)
	}
	rec.State = &st
	return rec, nil
}

// fromHome reads the state of the home ledger's current run, for a guard's
// ledger that never ran before; nothing when the home ledger never ran.
func fromHome(ctx context.Context, c client.Client, home string) (Recovery, error) {
	res, err := c.QueryWorkflow(ctx, home, "", QueryState)
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return Recovery{}, nil
	case err != nil:
		return Recovery{}, fmt.Errorf("asking the task queue's ledger %s for what it counted: %w", home, err)
	}
	var st State
	if err := res.Get(&st); err != nil {
		return Recovery{}, fmt.Errorf("decoding the state of the task queue's ledger %s: %w", home, err)
	}
	return Recovery{From: home, Home: true, State: &st}, nil
}

// lastClosed is the ledger's run that closed last, other than req's own;
// nil when none did.
func lastClosed(ctx context.Context, c client.Client, ns string, req RecoverRequest) (*workflowpb.WorkflowExecutionInfo, error) {
	var (
		last  *workflowpb.WorkflowExecutionInfo
		token []byte
	)
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace:     ns,
			Query:         fmt.Sprintf("WorkflowId = %q AND ExecutionStatus != 'Running'", req.WorkflowID),
			NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("listing the ledger's closed runs: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			if e.GetExecution().GetRunId() == req.RunID || e.GetCloseTime() == nil {
				continue
			}
			if last == nil || e.GetCloseTime().AsTime().After(last.GetCloseTime().AsTime()) {
				last = e
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return last, nil
		}
	}
}

// actWorkflow is ActWorkflow: it sends an operator's signed act to the
// ledger of its own task queue, by local activity, and returns what the
// ledger holds after it. It checks nothing itself: the ledger does.
func actWorkflow(ctx workflow.Context, a Act) (View, error) {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: 5 * time.Second},
	})
	var v View
	err := workflow.ExecuteLocalActivity(lctx, ActActivity, a).Get(ctx, &v)
	return v, err
}
