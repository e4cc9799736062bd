package ledger

import (
	"context"
	"fmt"
	"slices"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// This file routes a run's reservations and settlements (ReserveActivity,
// SettleActivity) to the ledgers (shard.go): the pauses to the task queue's,
// each guard's count to that guard's, under the worker's leases where they
// can answer (spender.go).

// reserve is ReserveActivity. It asks the home ledger of its task queue
// whether a pause stops the call (the worker's lease of it knows, or the
// reserve update with PausesOnly), then reserves the call with each guard
// that covers it: under the worker's lease of the guard's ledger, or with
// that ledger's reserve update (starting the ledger if need be). One guard
// that denies or asks releases the others'. The reservation names the run
// the activity serves, whatever the run passed.
func (c *caller) reserve(ctx context.Context, r Reservation) (Verdict, error) {
	info := activity.GetInfo(ctx)
	r.Workflow, r.PausesOnly = info.WorkflowExecution.ID, false
	tq := info.TaskQueue
	if c.eng == nil { // no guard: the home ledger says whether a pause stops it
		var v Verdict
		err := c.call(ctx, tq, "", UpdateReserve, "r-", r, &v)
		return v, err
	}
	if err := checkReservation(r); err != nil {
		return answered(r, Verdict{Decide: Denied, Reason: "the fleet ledger refuses this reservation: " + err.Error()}), nil
	}
	switch p, paused, known := c.spenderOf(ctx, tq, "").pausedBy(r); {
	case paused:
		return answered(r, Verdict{Decide: Paused, Pause: &p, Reason: pausedReason(p, r.Tool)}), nil
	case !known:
		q := r
		q.PausesOnly, q.Commits, q.Over = true, nil, ""
		var v Verdict
		if err := c.call(ctx, tq, "", UpdateReserve, "p-", q, &v); err != nil {
			return Verdict{}, err
		}
		if v.Decide != Reserved {
			return answered(r, v), nil
		}
	}
	guards := coveringGuards(c.eng, r.Tool, r.Destructive)
	vs := make([]Verdict, 0, len(guards))
	for _, g := range guards {
		v, err := c.reserveAt(ctx, tq, g, r)
		if err != nil {
			c.unwind(ctx, tq, guards[:len(vs)], vs, r)
			return Verdict{}, err
		}
		vs = append(vs, v)
	}
	v := merged(vs)
	if v.Decide != Reserved {
		c.unwind(ctx, tq, guards, vs, r)
	}
	return answered(r, v), nil
}

// reserveAt reserves r with guard's ledger: under the worker's lease of it,
// or with its reserve update.
func (c *caller) reserveAt(ctx context.Context, taskQueue, guard string, r Reservation) (Verdict, error) {
	if r.Over != guard { // approvers let the call past this guard, not another
		r.Over = ""
	}
	sp := c.spenderOf(ctx, taskQueue, guard)
	if v, ok := sp.reserve(r); ok {
		return v, nil
	}
	var v Verdict
	err := c.call(ctx, taskQueue, guard, UpdateReserve, "r-", sp.toLedger(r), &v)
	if err == nil {
		sp.sentToLedger(r.Key, v)
	}
	return v, err
}

// unwind releases r with the guards (of vs, answered in the same order) that
// reserved it, when another guard refused it: the call does not go on. A
// release that fails leaves the call counted until its window ends.
func (c *caller) unwind(ctx context.Context, taskQueue string, guards []string, vs []Verdict, r Reservation) {
	for i, g := range guards {
		if i < len(vs) && vs[i].Decide == Reserved && !vs[i].Committed {
			_, _ = c.settleAt(ctx, taskQueue, g, Settlement{Key: r.Key, Workflow: r.Workflow})
		}
	}
}

// merged is one verdict of the guards' ledgers' verdicts: the first that
// denies, else the first that asks, else reserved, counting toward every
// guard.
func merged(vs []Verdict) Verdict {
	for _, d := range []string{Denied, Paused, Ask} {
		if i := slices.IndexFunc(vs, func(v Verdict) bool { return v.Decide == d }); i >= 0 {
			return vs[i]
		}
	}
	out := Verdict{Decide: Reserved, Again: len(vs) > 0}
	for _, v := range vs {
		if v.Decide != Reserved { // a ledger of another version's answer: refused, as the ledger refuses what it cannot count
			return Verdict{Decide: Denied, Guard: v.Guard, Reason: "the fleet ledger answered " + cut(v.Decide, 40) + ", which this worker does not know: the call is refused"}
		}
		out.Uses = append(out.Uses, v.Uses...)
		out.Again = out.Again && v.Again
		out.Committed = out.Committed || v.Committed
	}
	return out
}

// settle is SettleActivity: it settles the call with each guard that
// covers it (every guard when the settlement names no tool; the home
// ledger without a policy), naming the run the activity serves.
func (c *caller) settle(ctx context.Context, s Settlement) (Settled, error) {
	info := activity.GetInfo(ctx)
	s.Workflow = info.WorkflowExecution.ID
	if c.eng == nil {
		return c.settleAt(ctx, info.TaskQueue, "", s)
	}
	guards := coveringGuards(c.eng, s.Tool, s.Destructive)
	if s.Tool == "" {
		for _, g := range c.eng.Guards() {
			guards = append(guards, g.ID)
		}
	}
	out := Settled{Entry: keyID(s.Key)}
	for _, g := range guards {
		o, err := c.settleAt(ctx, info.TaskQueue, g, s)
		if err != nil {
			return Settled{}, err
		}
		out.Found, out.Committed = out.Found || o.Found, out.Committed || o.Committed
		if out.Refused == "" {
			out.Refused = o.Refused
		}
	}
	return out, nil
}

// settleAt settles s with guard's ledger: in the worker when the worker's
// lease reserved the call (spender.go); else by the settle update, which a
// ledger continuing as new refuses (the activity sends it again, to the
// next run) where a signal would fail the ledger's closing workflow task;
// and, when the ledger does not answer within settleWait (a ledger whose
// worker is gone, or one the server cannot hand out just after it
// restarted), by signal (SignalSettle), which the server keeps for the
// ledger until it runs again.
func (c *caller) settleAt(ctx context.Context, taskQueue, guard string, s Settlement) (Settled, error) {
	if out, ok := c.spenderOf(ctx, taskQueue, guard).settle(s); ok {
		return out, nil
	}
	var out Settled
	uctx, cancel := context.WithTimeout(ctx, settleWait)
	err := c.call(uctx, taskQueue, guard, UpdateSettle, "s-", s, &out)
	cancel()
	if err == nil || isClosing(err) || temporal.IsApplicationError(err) || ctx.Err() != nil {
		return out, err
	}
	wid := ShardID(taskQueue, guard)
	if serr := c.clientOf(ctx).SignalWorkflow(ctx, wid, "", SignalSettle, s); serr != nil {
		return Settled{}, fmt.Errorf("the fleet ledger %s took the settlement neither by update (%v) nor by signal: %w", wid, err, serr)
	}
	return Settled{Entry: keyID(s.Key)}, nil
}
