package workflows

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/tool"
)

// This file is a run's side of the fleet guards (rules version 10): the
// budgets, rate limits, repeat limits and pauses that hold across every run
// of the task queue, kept by the fleet ledger (package ledger), a workflow
// outside every run. Before a call a guard covers (or, under a policy with
// operators, any destructive call) goes on, the run reserves it with the
// ledger, keyed by the call's idempotency key; a human's decision on it is
// checked again; and once it has run the reservation is committed, or
// released when it did not run (rejected, expired, failed, answered from
// the memo). The ledger counts a key once, so a retried, rewound or
// re-approved call counts once; a rewind of the run gives nothing back.

// guardState holds the keys of the run's calls the fleet ledger counts,
// reserved and not settled yet.
type guardState struct {
	held map[string]bool
}

// PausedError is the ApplicationError type of a call a worker refused to
// run because the fleet ledger pauses its tool (or because it could not
// learn the pauses, for a destructive call): when it signs the call's
// permit, or when the call's activity is about to run. Not retried.
const PausedError = "ToolPaused"

// GuardRulePrefix starts the rule a guard's refusal or ask is recorded
// under ("guard:budget-refunds"), in the trace and in what the call waits on.
const GuardRulePrefix = "guard:"

// Trace statuses of the ledger (notices, not a call's outcome).
const (
	TraceReserved = "reserved" // the ledger counts the call: Reason says toward what
	TraceReleased = "released" // the call did not run: the ledger no longer counts it
)

// Ledger activity options: a ledger that does not answer within
// ledgerPatience refuses the call (fails closed).
const (
	ledgerAttempt  = 10 * time.Second
	ledgerPatience = 5 * time.Minute
	settlePatience = time.Minute
)

// guarded reports whether a call of the tool consults the fleet ledger.
func (r *run) guarded(toolName string, spec tool.Spec) bool {
	return r.engine != nil && r.engine.Policy().Guarded(toolName, spec.Destructive)
}

// callKey is the idempotency key of a call: its tool's activity and the
// ledger know it by this key.
func (r *run) callKey(ctx workflow.Context, c tool.Call) string {
	info := workflow.GetInfo(ctx)
	chain := info.FirstRunID
	if chain == "" { // a server that does not say: this run is the chain
		chain = info.WorkflowExecution.RunID
	}
	key := tool.IdempotencyKey(info.WorkflowExecution.ID, chain, c.ID)
	// A rewound run may propose this call id again with other arguments:
	// that is another call, and another key.
	d, _ := tool.Digest(c.Tool, c.Args) // c.Args is canonical: check passed
	return tool.ArgsKey(key, d)
}

// ledgerOptions runs the ledger's activities as local activities: a
// reservation then costs the run no activity task of its own, only the
// ledger's update (and a marker in the run's history, its answer).
func ledgerOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    ledgerAttempt,
		ScheduleToCloseTimeout: ledgerPatience,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    100 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    5 * time.Second,
		},
	})
}

// reserve asks the ledger to count call c at stage; over names the guard
// whose approvers let the call past its limit. A ledger that does not
// answer refuses the call.
func (r *run) reserve(ctx workflow.Context, c tool.Call, spec tool.Spec, stage, over string) ledger.Verdict {
	digest, _ := tool.Digest(c.Tool, c.Args)
	req := ledger.Reservation{Key: r.callKey(ctx, c), Workflow: r.workflowID, CallID: c.ID, Tool: c.Tool,
		Destructive: spec.Destructive, Args: c.Args, Digest: digest, RequestedBy: r.RequestedBy, Stage: stage, Over: over}
	var v ledger.Verdict
	err := workflow.ExecuteLocalActivity(ledgerOptions(ctx), ledger.ReserveActivity, req).Get(ctx, &v)
	r.localSince++
	if err != nil {
		return ledger.Verdict{Decide: ledger.Denied, Reason: "the fleet ledger did not answer (" + clip(errorText(err), 300) +
			"): the call is refused, since a guard or a pause may hold it"}
	}
	if v.Decide == ledger.Reserved && len(v.Uses) > 0 {
		r.held[req.Key] = true
		r.record(c, TraceRecord{Status: TraceReserved, Reason: usesText(v)})
	}
	return v
}

// settleCall commits c's reservation (it ran) or releases it (it did not),
// by local activity, at once: nothing holds what ran as reserved, for a
// release to free. The activity names the run, and the ledger takes a
// settlement only from the run that reserved the call; the call's tool
// takes it to the ledgers of the guards that counted it. The ledger settles
// a key once, whatever comes again.
func (r *run) settleCall(ctx workflow.Context, c tool.Call, spec tool.Spec, commit bool) {
	key := r.callKey(ctx, c)
	r.settleNow(ctx, ledger.Settlement{Key: key, Commit: commit, Tool: c.Tool, Destructive: spec.Destructive})
	if !commit && r.held[key] {
		r.record(c, TraceRecord{Status: TraceReleased, Reason: "the call did not run: the fleet ledger no longer counts it"})
	}
	delete(r.held, key)
}

// settleNow settles one call with the ledger by local activity
// (ledger.SettleActivity), even while the run is being cancelled. A
// settlement that does not reach the ledger leaves the call counted until
// its window ends: the ledger errs on the side of the budget.
func (r *run) settleNow(ctx workflow.Context, s ledger.Settlement) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	lctx := workflow.WithLocalActivityOptions(dctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    ledgerAttempt,
		ScheduleToCloseTimeout: settlePatience,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    100 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    5 * time.Second,
		},
	})
	var out ledger.Settled
	err := workflow.ExecuteLocalActivity(lctx, ledger.SettleActivity, s).Get(dctx, &out)
	r.localSince++
	if err != nil {
		r.logger.Warn("a settlement did not reach the fleet ledger: the call stays counted until its window ends", "error", err)
	}
}

// usesText says what a reserved call counts toward.
func usesText(v ledger.Verdict) string {
	parts := make([]string, 0, len(v.Uses))
	for _, u := range v.Uses {
		parts = append(parts, fmt.Sprintf("guard %s (%s): %d of %d", u.Guard, u.Scope, u.Sum, u.Limit))
	}
	s := "counted by the fleet ledger: " + strings.Join(parts, "; ")
	if v.Again {
		s += " (reserved before: counted once)"
	}
	return s
}

// guardStage is the fleet ledger's part of the gate, for a call a guard
// covers (or, under a policy with operators, any destructive call). After
// the rules, the ledger reserves the call: a paused tool or a guard that
// denies blocks it; a guard that asks puts its own question in place of the
// rule's. Once a human has let the call by, the ledger checks it again: a
// pause may have come, or a guard filled, while it waited.
func (r *run) guardStage(ctx workflow.Context, f *flight) stage {
	switch {
	case !r.guarded(f.c.Tool, f.spec) && f.decided:
		return stageMemo
	case !r.guarded(f.c.Tool, f.spec):
		return stageDecide
	case f.decided:
		var original []byte // the arguments reserved at the gate, when an approver edited them
		if !bytes.Equal(f.proposed, f.c.Args) {
			original = f.proposed
		}
		if out := r.guardDecided(ctx, f.c, f.spec, f.verdict.Rule, original); out != nil {
			f.owes = false // refused: the ledger holds nothing of the call
			return f.end(*out)
		}
		f.counted = f.c.Args
		return stageMemo
	}
	v := r.reserve(ctx, f.c, f.spec, ledger.StageGate, "")
	switch v.Decide {
	case ledger.Reserved:
	case ledger.Ask:
		need := policy.Approvers{Count: 1}
		if v.Need != nil {
			need = *v.Need
		}
		f.verdict = policy.Verdict{Rule: GuardRulePrefix + v.Guard, Decide: policy.Ask, Need: need}
		f.guardWhy = clip(v.Reason, MaxTextBytes/2) + " (so " + need.Describe() + " may let it past)"
	default:
		f.owes = false
		return f.end(r.guardRefusal(f.c, v))
	}
	return stageDecide
}

// guardRefusal is the outcome of a call the ledger refused.
func (r *run) guardRefusal(c tool.Call, v ledger.Verdict) outcome {
	rule := ""
	if v.Guard != "" {
		rule = GuardRulePrefix + v.Guard
	}
	msg := clip(plan.DeniedByLedger+v.Reason, MaxTextBytes)
	r.record(c, TraceRecord{Status: TraceBlocked, Rule: rule, Error: msg})
	return outcome{Status: TraceBlocked, Error: msg}
}

// guardDecided checks a call a human has decided again with the ledger,
// before it runs. rule is the rule the call waited on (a guard's when it
// asked); original are the arguments reserved at the gate when an approver
// edited them (nil: not edited).
func (r *run) guardDecided(ctx workflow.Context, c tool.Call, spec tool.Spec, rule string, original []byte) *outcome {
	if original != nil {
		r.settleCall(ctx, tool.Call{ID: c.ID, Tool: c.Tool, Args: original}, spec, false) // the edit is another call
	}
	over := ""
	if original == nil && strings.HasPrefix(rule, GuardRulePrefix) {
		over = strings.TrimPrefix(rule, GuardRulePrefix)
	}
	v := r.reserve(ctx, c, spec, ledger.StageDecided, over)
	if v.Decide == ledger.Reserved {
		return nil
	}
	if original == nil { // the gate's reservation of this very call
		r.settleCall(ctx, c, spec, false)
	}
	out := r.guardRefusal(c, v)
	out.Error = r.notExecuted(out.Error)
	return &out
}
