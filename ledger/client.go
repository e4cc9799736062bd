package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
)

// ErrNotStarted is what Guards returns when the task queue's ledger was
// never started (no run has reserved a call, nobody has paused a tool).
var ErrNotStarted = errors.New("the fleet ledger of this task queue was never started")

// caller is what runs reach the ledger with: ReserveActivity,
// SettleActivity and ActActivity, through client (nil: the activity's).
type caller struct {
	client client.Client
	tools  []string // the tools an operator may pause (Config.Tools); nil: any
	// checked are the ledger runs seen to run on their own task queue.
	checked sync.Map // run id → true
	// eng is the worker's compiled policy (nil: none, or it does not
	// compile): its guards are what the spenders lease.
	eng *policy.Engine
	// spenders are the worker's leases, one per ledger: the home ledger's
	// (its pauses) and each guard's (spender.go, shard.go).
	spenders sync.Map // ShardID → *spender
}

// spenderOf is the spender of the ledger of guard ("": the home ledger, which
// leases no guard and tells the pauses) on taskQueue; nil without a policy:
// every call goes to the ledger.
func (c *caller) spenderOf(ctx context.Context, taskQueue, guard string) *spender {
	if c.eng == nil {
		return nil
	}
	wid := ShardID(taskQueue, guard)
	if sp, ok := c.spenders.Load(wid); ok {
		return sp.(*spender)
	}
	cl := c.clientOf(ctx)
	sp := newSpender(c.eng, guard, func(ctx context.Context, updateID string, q LeaseRequest) (LeaseGrant, error) {
		var g LeaseGrant
		h, err := updateWithStart(ctx, cl, taskQueue, wid, UpdateLease, updateID, q, &g)
		if err == nil {
			err = c.checkRun(ctx, cl, taskQueue, wid, h.RunID())
		}
		return g, err
	})
	got, _ := c.spenders.LoadOrStore(wid, sp)
	return got.(*spender)
}

// clientOf is the client the activity reaches the ledgers with.
func (c *caller) clientOf(ctx context.Context) client.Client {
	if c.client != nil {
		return c.client
	}
	return activity.GetClient(ctx)
}

// settleWait is how long SettleActivity waits for the ledger's answer to
// the settle update before it signals the settlement instead.
const settleWait = 5 * time.Second

// act is ActActivity: it sends an operator's signed act to the ledger of
// the activity's task queue.
func (c *caller) act(ctx context.Context, a Act) (View, error) {
	if err := c.knows(a); err != nil {
		return View{}, temporal.NewNonRetryableApplicationError(err.Error(), "ToolgateLedgerRefused", nil)
	}
	tq := activity.GetInfo(ctx).TaskQueue
	v, err := Toggle(ctx, c.clientOf(ctx), tq, a.Pause, a.Token)
	if err == nil {
		c.spenderOf(ctx, tq, "").told(v.Pauses)
	}
	var ae *temporal.ApplicationError
	if isRefusal(err) && errors.As(err, &ae) {
		return v, temporal.NewNonRetryableApplicationError(ae.Message(), "ToolgateLedgerRefused", nil)
	}
	return v, err
}

// knows refuses a pause of a tool the worker does not have (c.tools), before
// the act reaches the ledger: its token is not spent.
func (c *caller) knows(a Act) error {
	if !a.Pause || c.tools == nil {
		return nil
	}
	cl, err := signed.Peek(a.Token)
	if err != nil || cl.Tool == "" || cl.Tool == AllTools || slices.Contains(c.tools, cl.Tool) {
		return nil // the ledger says what is wrong with the token
	}
	names := slices.Sorted(slices.Values(c.tools))
	if len(names) > 40 {
		names = append(names[:40], fmt.Sprintf("and %d more", len(c.tools)-40))
	}
	return fmt.Errorf("pause refused: no tool %q on this task queue, so a pause of it would stop nothing; its worker has %s (check the name; %q pauses every destructive tool); nothing changed, the token is not spent",
		cut(cl.Tool, 120), strings.Join(names, ", "), AllTools)
}

// activityUpdateID names the update an activity sends to the ledger wid:
// the same for every attempt of one activity, another for any other
// activity or ledger. (The home ledger's id is hashed as "", as before
// shards.)
func activityUpdateID(info activity.Info, wid, name, prefix string) string {
	to := ""
	if wid != ID(info.TaskQueue) {
		to = "/" + wid
	}
	sum := sha256.Sum256([]byte(info.WorkflowExecution.RunID + "/" + info.ActivityID + "/" + name + to))
	return prefix + hex.EncodeToString(sum[:])
}

// call sends update name with arg to the ledger of guard ("": the home
// ledger) on the activity's task queue (taskQueue), with UpdateWithStart,
// and decodes its result into out. A ledger run on another task queue
// (started there by someone else) is refused.
func (c *caller) call(ctx context.Context, taskQueue, guard, name, prefix string, arg, out any) error {
	info := activity.GetInfo(ctx)
	cl := c.clientOf(ctx)
	wid := ShardID(taskQueue, guard)
	h, err := updateWithStart(ctx, cl, taskQueue, wid, name, activityUpdateID(info, wid, name, prefix), arg, out)
	if err == nil {
		err = c.checkRun(ctx, cl, taskQueue, wid, h.RunID())
	}
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

// checkRun makes sure the ledger run (of workflow id wid) that answered
// runs the ledger's workflow on taskQueue, once per run: a ledger someone
// started on a task queue of their own is answered by their worker, which
// may allow anything.
func (c *caller) checkRun(ctx context.Context, cl client.Client, taskQueue, wid, runID string) error {
	if runID == "" {
		return nil
	}
	if _, ok := c.checked.Load(runID); ok {
		return nil
	}
	d, err := cl.DescribeWorkflowExecution(ctx, wid, runID)
	if err != nil {
		return fmt.Errorf("describing the fleet ledger's run %s: %w", runID, err)
	}
	info := d.GetWorkflowExecutionInfo()
	if tq, typ := info.GetTaskQueue(), info.GetType().GetName(); tq != taskQueue || typ != WorkflowName {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"the fleet ledger %s (run %s) runs workflow %q on task queue %q, not %s on %q: someone else started it, "+
				"and its answer is refused; the call is refused until it is gone", wid, runID, cut(typ, 80), cut(tq, 200), WorkflowName, taskQueue),
			"ToolgateLedgerRefused", nil)
	}
	c.checked.Store(runID, true)
	return nil
}

// updateWithStart sends update name to the ledger wid on taskQueue,
// starting it when none ever ran, waits for its result and returns the run
// that answered. A ledger whose last run closed (terminated, failed, timed out)
// is started anew too: that run rebuilds the closed one's state before it
// answers (RecoverActivity). It returns the update's handle, which names
// the run that answered.
func updateWithStart(ctx context.Context, c client.Client, taskQueue, wid, name, updateID string, arg, out any) (client.WorkflowUpdateHandle, error) {
	op := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       wid,
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
		return nil, err
	}
	return h, h.Get(ctx, out)
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

// ActWorkflowID is the workflow id of the ActWorkflow that carries an act
// signed as token: the same token, the same act.
func ActWorkflowID(token string) string { return "toolgate-act-" + tokenID(token) }

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
		_, err := updateWithStart(ctx, c, taskQueue, ID(taskQueue), name, prefix+tokenID(token), Switch{Token: token}, &v)
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

// Guards asks the ledgers of taskQueue what they hold: the home ledger its
// pauses and guards, and each guard's ledger its use (a guard whose ledger
// never started has none). ErrNotStarted: the home ledger was never
// started.
func Guards(ctx context.Context, c client.Client, taskQueue string) (View, error) {
	v, err := queryView(ctx, c, ID(taskQueue))
	if err != nil || !v.Sharded {
		return v, err
	}
	for i := range v.Guards {
		sv, err := queryView(ctx, c, ShardID(taskQueue, v.Guards[i].ID))
		switch {
		case errors.Is(err, ErrNotStarted):
			continue
		case err != nil:
			return v, fmt.Errorf("asking guard %s's ledger: %w", v.Guards[i].ID, err)
		}
		v.Entries += sv.Entries
		for _, gv := range sv.Guards {
			if gv.ID == v.Guards[i].ID {
				v.Guards[i].Scopes = gv.Scopes
			}
		}
	}
	return v, nil
}

// queryView asks the ledger wid for its View; ErrNotStarted: it never ran.
func queryView(ctx context.Context, c client.Client, wid string) (View, error) {
	var v View
	res, err := c.QueryWorkflow(ctx, wid, "", QueryGuards)
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return v, ErrNotStarted
	case err != nil:
		return v, err
	}
	return v, res.Get(&v)
}
