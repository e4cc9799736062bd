package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/workflows"
)

// ---------------------------------------------------------------------------
// 6. Latency by position in a run (see position.go for the figures).

// PositionRun is one run of sequential regular-activity calls (a
// continue-as-new chain for AgentRun past its history_limit) read by position.
type PositionRun struct {
	Workflow     string // "AgentRun" or "bare"
	Calls        int
	HistoryLimit int   // AgentRun's history_limit (0: the workflow's default)
	Events       []int // per run of the chain
	// Elapsed is the first run's start to the last run's close (server times).
	Elapsed    time.Duration
	Timings    []CallTiming
	Boundaries []time.Duration // continue-as-new boundaries (not part of any call)
	Summary    PositionSummary
}

// Runs is the number of runs in the chain.
func (p PositionRun) Runs() int { return len(p.Events) }

// CallsPerSecond is the run's calls over its time.
func (p PositionRun) CallsPerSecond() float64 { return float64(p.Calls) / p.Elapsed.Seconds() }

// Workflows measured by position.
const (
	WorkflowAgentRun = "AgentRun"
	WorkflowBare     = "bare"
)

// MeasurePositions warms up, then for each size runs one AgentRun
// (always_approve, every call a memo miss) and one Bare run of that many
// sequential echo calls with distinct arguments, and reads every call's
// latency and its parts from the histories.
func MeasurePositions(ctx context.Context, e *Env, sizes []int, historyLimit int, log io.Writer) ([]PositionRun, error) {
	if len(sizes) == 0 {
		return nil, nil
	}
	for _, wf := range []string{WorkflowAgentRun, WorkflowBare} { // warm-up, not counted
		if _, err := PositionsOf(ctx, e, wf, 10, historyLimit); err != nil {
			return nil, err
		}
	}
	var out []PositionRun
	for _, n := range sizes {
		for _, wf := range []string{WorkflowAgentRun, WorkflowBare} {
			p, err := PositionsOf(ctx, e, wf, n, historyLimit)
			if err != nil {
				return nil, fmt.Errorf("%s, %d calls: %w", wf, n, err)
			}
			s := p.Summary
			logf(log, "positions: %-8s %5d calls, %d run(s), %v: first %d p50 %s, last %d p50 %s (%.2fx)", wf, n, p.Runs(), p.Elapsed.Round(time.Millisecond),
				s.First.Calls(), dur(s.First.P50Total), s.Last.Calls(), dur(s.Last.P50Total), s.Growth)
			out = append(out, p)
		}
	}
	return out, nil
}

// PositionsOf runs one workflow (WorkflowAgentRun or WorkflowBare) of n
// sequential echo calls and reads it by position. Every call must be found.
func PositionsOf(ctx context.Context, e *Env, workflow string, n, historyLimit int) (PositionRun, error) {
	p := PositionRun{Workflow: workflow, Calls: n}
	calls := Calls(Echo, 1, n)
	var run RunRef
	var err error
	if workflow == WorkflowBare {
		run, err = e.Bare(ctx, calls)
	} else {
		in := Input(workflows.PolicyAlwaysApprove, calls)
		in.HistoryLimit, p.HistoryLimit = historyLimit, historyLimit
		run, _, err = e.Agent(ctx, in)
	}
	if err != nil {
		return p, err
	}
	chain, err := e.Chain(ctx, run.ID, run.RunID)
	if err != nil {
		return p, err
	}
	var hs []*historypb.History
	for _, rh := range chain {
		hs = append(hs, rh.History)
		p.Events = append(p.Events, len(rh.History.Events))
	}
	p.Elapsed = run.Elapsed
	p.Timings, p.Boundaries = ChainPositions(hs)
	if len(p.Timings) != n {
		return p, fmt.Errorf("%s %s: %d of %d calls found in the histories", workflow, run.ID, len(p.Timings), n)
	}
	p.Summary = Summarize(p.Timings)
	return p, nil
}

// ---------------------------------------------------------------------------
// 7. The approval round trip.

// Approvals are the approval round trips measured: runs of one destructive
// call (write) under the human policy, blocked at the gate and approved with
// the approve update as soon as the state query shows the call waiting.
type Approvals struct {
	Runs int
	// Update is the client's time from sending the approve update to its
	// return (UpdateWorkflow waiting for the completed stage, and the
	// handle's Get): the client's clock.
	Update []time.Duration
	// From the run's WorkflowExecutionUpdateAccepted event (server times) to
	// the approved call's ActivityTaskScheduled, its ActivityTaskStarted, and
	// the run's close event.
	ToScheduled, ToStarted, ToClosed []time.Duration
}

// MeasureApprovals warms up, then measures m approval round trips, one run each.
func MeasureApprovals(ctx context.Context, e *Env, m int, log io.Writer) (Approvals, error) {
	var a Approvals
	if m <= 0 {
		return a, nil
	}
	if _, err := ApprovalRoundTrip(ctx, e, 1); err != nil { // warm-up, not counted
		return a, err
	}
	for i := range m {
		rt, err := ApprovalRoundTrip(ctx, e, i+2)
		if err != nil {
			return a, err
		}
		a.Add(rt)
	}
	logf(log, "approvals: %d round trips: update sent → returned p50 %s; accepted → activity started p50 %s; accepted → run closed p50 %s",
		m, dur(Percentile(a.Update, 50)), dur(Percentile(a.ToStarted, 50)), dur(Percentile(a.ToClosed, 50)))
	return a, nil
}

// RoundTrip is one approval round trip.
type RoundTrip struct {
	Update, ToScheduled, ToStarted, ToClosed time.Duration
	Events                                   int // of the run's history
}

// Add appends one round trip.
func (a *Approvals) Add(rt RoundTrip) {
	a.Runs++
	a.Update = append(a.Update, rt.Update)
	a.ToScheduled, a.ToStarted, a.ToClosed = append(a.ToScheduled, rt.ToScheduled), append(a.ToStarted, rt.ToStarted), append(a.ToClosed, rt.ToClosed)
}

// ApprovalRoundTrip runs AgentRun with one write{"n": n} under the human
// policy, approves the call with the approve update once the state query
// shows it waiting, and reads the round trip from the client's clock and the
// run's history.
func ApprovalRoundTrip(ctx context.Context, e *Env, n int) (RoundTrip, error) {
	var rt RoundTrip
	var update atomic.Int64 // written by approve, which runs in a goroutine of its own
	approve := func(ctx context.Context, id, runID string) error {
		for {
			v, err := e.Client.QueryWorkflow(ctx, id, runID, workflows.QueryState)
			if err != nil {
				return fmt.Errorf("querying %s: %w", id, err)
			}
			var s workflows.State
			if err := v.Get(&s); err != nil {
				return err
			}
			if len(s.Interrupts) > 0 {
				it := s.Interrupts[0]
				d := workflows.DecisionInput{CallID: it.CallID, Approver: "bench", ArgsDigest: it.ArgsDigest}
				sent := time.Now()
				h, err := e.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, RunID: runID,
					UpdateName: workflows.UpdateApprove, Args: []any{d}, WaitForStage: client.WorkflowUpdateStageCompleted})
				if err == nil {
					err = h.Get(ctx, nil)
				}
				update.Store(int64(time.Since(sent)))
				if err != nil {
					return fmt.Errorf("approving %s of %s: %w", it.CallID, id, err)
				}
				return nil
			}
			if s.Status != workflows.StatusRunning && s.Status != workflows.StatusWaitingForApproval {
				return fmt.Errorf("run %s is %s before its call was approved", id, s.Status)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}
	run, _, err := e.agent(ctx, Input(workflows.PolicyHuman, Calls(Write, n, 1)), approve)
	if err != nil {
		return rt, err
	}
	if rt.Update = time.Duration(update.Load()); rt.Update == 0 {
		return rt, fmt.Errorf("run %s completed without the approval being sent", run.ID)
	}
	h, err := e.History(ctx, run.ID, run.RunID)
	if err != nil {
		return rt, err
	}
	rt.Events = len(h.Events)
	rt.ToScheduled, rt.ToStarted, rt.ToClosed, err = approvalTimes(h)
	return rt, err
}

// approvalTimes reads, from a run with one approval by update, the times
// from WorkflowExecutionUpdateAccepted to the first ActivityTaskScheduled
// after it, to that activity's ActivityTaskStarted, and to the close event.
func approvalTimes(h *historypb.History) (toScheduled, toStarted, toClosed time.Duration, err error) {
	var accepted, scheduled, started time.Time
	var schedID int64
	evs := h.GetEvents()
	for _, ev := range evs {
		at := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			if accepted.IsZero() {
				accepted = at
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if !accepted.IsZero() && schedID == 0 {
				scheduled, schedID = at, ev.GetEventId()
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if schedID != 0 && ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId() == schedID {
				started = at
			}
		}
	}
	if accepted.IsZero() || started.IsZero() || len(evs) == 0 {
		return 0, 0, 0, errors.New("no WorkflowExecutionUpdateAccepted followed by an activity that started")
	}
	closed := evs[len(evs)-1].GetEventTime().AsTime()
	return scheduled.Sub(accepted), started.Sub(accepted), closed.Sub(accepted), nil
}
