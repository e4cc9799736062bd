package model

import (
	"context"
	"fmt"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/workflows"
)

// The seed walk-through's run.
const (
	WalkThroughID   = "model-walkthrough"
	WalkThroughGoal = "Customers say they cannot log in after a password reset. Find the ticket about it and close it."
	Reviewer        = "alice"
	RejectReason    = "wrong ticket: TKT-3 is a duplicate"
	// RecordedHistory is the walk-through's recorded history, relative to
	// this package's directory.
	RecordedHistory = "testdata/model_walkthrough.json"
)

// WalkThroughInput is the walk-through's RunInput: the OpenAI planner,
// human approval.
func WalkThroughInput() workflows.RunInput {
	return workflows.RunInput{
		Goal:     WalkThroughGoal,
		Planner:  plan.Config{Kind: plan.KindOpenAI, Model: ModelName},
		Approval: workflows.PolicyHuman,
	}
}

// WalkThrough is what the walk-through saw.
type WalkThrough struct {
	// Paused is the run's state while the close waited for a decision.
	Paused workflows.State
	// Decision is what the reject update returned.
	Decision workflows.DecisionResult
	// Result is the run's result.
	Result workflows.RunResult
	// History is the closed run's whole history.
	History *historypb.History
}

// RunWalkThrough plays the seed walk-through on e with the model of
// SeedScript behind the planner: it starts the run, waits until the close of
// TKT-3 waits for a human, rejects it (update "reject", reason RejectReason),
// waits for the result and fetches the history. It fails if the run does not
// pause there. onPause, if not nil, is called while the close waits; an error
// from it ends the walk-through.
func RunWalkThrough(ctx context.Context, e *Env, id string, onPause func(workflows.State) error) (*WalkThrough, error) {
	w := &WalkThrough{}
	run, err := e.Start(ctx, id, WalkThroughInput())
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", id, err)
	}
	w.Paused, err = e.WaitState(ctx, id, func(s workflows.State) bool {
		switch s.Status {
		case workflows.StatusWaitingForApproval, workflows.StatusCompleted, workflows.StatusFailed, workflows.StatusBlocked:
			return true
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	if w.Paused.Status != workflows.StatusWaitingForApproval || len(w.Paused.Interrupts) != 1 ||
		w.Paused.Interrupts[0].Tool != "close_ticket" {
		return w, fmt.Errorf("the run did not pause at the close: state %+v", w.Paused)
	}
	if onPause != nil {
		if err := onPause(w.Paused); err != nil {
			return w, err
		}
	}
	upd, err := e.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: id,
		UpdateName: workflows.UpdateReject,
		Args: []any{workflows.DecisionInput{CallID: w.Paused.Interrupts[0].CallID, Approver: Reviewer, Reason: RejectReason,
			ArgsDigest: w.Paused.Interrupts[0].ArgsDigest}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return w, fmt.Errorf("rejecting: %w", err)
	}
	if err := upd.Get(ctx, &w.Decision); err != nil {
		return w, fmt.Errorf("rejecting: %w", err)
	}
	if err := run.Get(ctx, &w.Result); err != nil {
		return w, fmt.Errorf("the run's result: %w", err)
	}
	if w.History, err = e.History(ctx, id); err != nil {
		return w, err
	}
	return w, nil
}
