package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// ErrNotStarted is what Guards returns when the task queue's ledger was
// never started (no run has reserved a call, nobody has paused a tool).
var ErrNotStarted = errors.New("the fleet ledger of this task queue was never started")

// reserveActivity is ReserveActivity: it sends the reserve update to the
// ledger of its task queue, starting the ledger if need be.
func reserveActivity(ctx context.Context, r Reservation) (Verdict, error) {
	var v Verdict
	err := callLedger(ctx, UpdateReserve, "r-", r, &v)
	return v, err
}

// settleActivity is SettleActivity, alike with the settle update.
func settleActivity(ctx context.Context, s Settlement) (Settled, error) {
	var out Settled
	err := callLedger(ctx, UpdateSettle, "s-", s, &out)
	return out, err
}

// activityUpdateID names the update an activity sends: the same for every
// attempt of one activity, another for any other activity.
func activityUpdateID(info activity.Info, name, prefix string) string {
	sum := sha256.Sum256([]byte(info.WorkflowExecution.RunID + "/" + info.ActivityID + "/" + name))
	return prefix + hex.EncodeToString(sum[:])
}

// callLedger sends update name with arg to the ledger of the activity's
// task queue (UpdateWithStart) and decodes its result into out.
func callLedger(ctx context.Context, name, prefix string, arg, out any) error {
	info := activity.GetInfo(ctx)
	err := updateWithStart(ctx, activity.GetClient(ctx), info.TaskQueue, name, activityUpdateID(info, name, prefix), arg, out)
	switch {
	case err == nil:
		return nil
	case isClosing(err):
		// Retryable: the next attempt reaches the ledger's next run.
		return fmt.Errorf("the fleet ledger is continuing as new: %w", err)
	case isRefusal(err):
		return temporal.NewNonRetryableApplicationError("the fleet ledger refused the "+name+" update: "+err.Error(), "ToolgateLedgerRefused", err)
	}
	return fmt.Errorf("the fleet ledger's %s update: %w", name, err)
}

// updateWithStart sends update name to ID(taskQueue), starting the ledger
// when it does not run, and waits for its result.
func updateWithStart(ctx context.Context, c client.Client, taskQueue, name, updateID string, arg, out any) error {
	op := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       ID(taskQueue),
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, WorkflowName, Input{})
	h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateID:     updateID,
			UpdateName:   name,
			Args:         []any{arg},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return err
	}
	return h.Get(ctx, out)
}

// isClosing reports whether err is a ledger run's refusal while it
// continues as new (ClosingError).
func isClosing(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.Type() == ClosingError
}

// isRefusal reports whether err is the ledger's own answer (an update its
// validator or handler refused), which no retry changes.
func isRefusal(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.Type() != ClosingError
}

// tokenID is a signed token's id: the first 16 bytes of its SHA-256, in
// hex (as package workflows names tokens).
func tokenID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:16])
}

// Toggle sends a signed pause (pause true) or unpause to the ledger of
// taskQueue, starting it if need be, and returns what the ledger holds
// after it. The update's id comes from the token, so sending the same
// token again is the same update. It tries again, for a few seconds, while
// the ledger continues as new.
func Toggle(ctx context.Context, c client.Client, taskQueue string, pause bool, token string) (View, error) {
	name, prefix := UpdateUnpause, "u-"
	if pause {
		name, prefix = UpdatePause, "p-"
	}
	var v View
	for attempt := 1; ; attempt++ {
		err := updateWithStart(ctx, c, taskQueue, name, prefix+tokenID(token), Switch{Token: token}, &v)
		if err == nil || !isClosing(err) || attempt == 5 {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
}

// Guards asks the ledger of taskQueue what it holds: each guard's use and
// the pauses. ErrNotStarted: the ledger was never started.
func Guards(ctx context.Context, c client.Client, taskQueue string) (View, error) {
	var v View
	res, err := c.QueryWorkflow(ctx, ID(taskQueue), "", QueryGuards)
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return v, ErrNotStarted
	case err != nil:
		return v, err
	}
	return v, res.Get(&v)
}
