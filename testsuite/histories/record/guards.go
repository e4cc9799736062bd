package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// The guarded flow (rules version 10) runs under fixturePolicy with
// dave's role ops as its operators and fixtureGuards: a budget of 8000
// cents an hour over refund, kept by the fleet ledger of the flow's own
// task queue (guardedQueue, so no other flow's worker starts that ledger
// with another policy). It writes two histories: the run's, and the
// ledger's (ledgerFixture), which the run's reservations started.

// fixtureGuards is what the guarded flow adds to fixturePolicy (with
// fixtureOperators).
const fixtureGuards = `guards:
  - id: refund-budget
    kind: budget
    tools: [refund]
    amount: args.amount_cents
    limit: 8000
    window: 1h
    reason: at most 80.00 refunded an hour across the fleet
`

// guardedQueue is the guarded flow's task queue: its ledger is
// ledger.ID(guardedQueue).
const guardedQueue = "toolgate-guarded"

// ledgerFixture names the task queue's ledger's history, and
// ledgerGuardFixture the budget's ledger's: the name + suffix + ".json".
const (
	ledgerFixture      = "ledger"
	ledgerGuardFixture = "ledger_guard"
)

// guardedFlow: four refunds and a close, one a step, under the budget.
//
//	c-1 refund BK-1 2000: allowed by rule small-refunds; reserved (2000 of 8000), runs, committed
//	c-2 refund BK-2 5000: no rule holds it, so it waits for finance; reserved at the gate (7000 of 8000);
//	    while it waits dave pauses close_ticket fleet-wide (signed); bob approves c-2 (signed),
//	    the ledger checks it again (reserved before: counted once), it runs, committed
//	c-3 refund BK-1 1000: allowed by rule; reserved (8000 of 8000), runs, committed
//	c-4 refund BK-3 2000: allowed by rule, denied by the guard (10000 would be over 8000)
//	c-5 close TKT-3: denied by the ledger, close_ticket being paused
//
// Once the run has closed dave unpauses close_ticket, and the ledger's
// (still running, idle) run is written too.
func guardedFlow() flow {
	return flow{
		name: "guarded",
		in: workflows.RunInput{Goal: "refund within the budget", Planner: scripted("refunded what the budget allowed",
			[]tool.Proposal{refund("BK-1", 2000, "")},
			[]tool.Proposal{refund("BK-2", 5000, "")},
			[]tool.Proposal{refund("BK-1", 1000, "")},
			[]tool.Proposal{refund("BK-3", 2000, "")},
			[]tool.Proposal{closeTKT3})},
		policy:      true,
		operators:   true,
		extraPolicy: fixtureGuards,
		taskQueue:   guardedQueue,
		signedDrive: func(ctx context.Context, cl client.Client, id string, s *signers) error {
			if _, err := waitPending(ctx, cl, id, "c-2", workflows.KindGate); err != nil {
				return err
			}
			tg := tgclient.New(cl)
			if _, err := tg.Pause(ctx, guardedQueue, closeTKT3.Tool, "the ticket system is being migrated", "dave", s.keys["dave"]); err != nil {
				return err
			}
			res, err := s.decideSigned(ctx, cl, id, "c-2", signed.ActionApprove, "bob", nil)
			return wantDecision(res, err, workflows.TraceApproved)
		},
		extra: exportLedger,
		// The run's trace names each reservation (reserved) next to the
		// call's own records.
		status: workflows.StatusCompleted,
		trace: []string{
			"c-1 reserved", "c-1 approved", "c-1 ok",
			"c-2 reserved", "c-2 blocked", "c-2 approved", "c-2 reserved", "c-2 ok",
			"c-3 reserved", "c-3 approved", "c-3 ok",
			"c-4 blocked",
			"c-5 blocked",
		},
		approvers: []string{"rule:small-refunds", "bob", "rule:small-refunds"},
	}
}

// exportLedger unpauses close_ticket (dave, signed), checks what the
// ledger holds, waits until its run is idle and writes its history as
// ledgerFixture+suffix+".json". The ledger never closes: its history is
// taken between workflow tasks, which replays (replay.File).
func exportLedger(ctx context.Context, cl client.Client, s *signers, file func(base string) string) ([]string, error) {
	tg := tgclient.New(cl)
	if _, err := tg.Unpause(ctx, guardedQueue, closeTKT3.Tool, "the migration is done", "dave", s.keys["dave"]); err != nil {
		return nil, err
	}
	// The worker reports what its lease spent, and returns the rest, at
	// its next renewals (a second apart): wait for them.
	deadline := time.Now().Add(15 * time.Second)
	for {
		v, ok, err := tg.Guards(ctx, guardedQueue)
		switch {
		case err != nil:
			return nil, err
		case !ok:
			return nil, errors.New("the fleet ledger of " + guardedQueue + " was never started")
		case len(v.Pauses) != 0:
			return nil, fmt.Errorf("the ledger still holds pauses %+v after the unpause", v.Pauses)
		}
		var committed, reserved, leased int64
		for _, g := range v.Guards {
			for _, sc := range g.Scopes {
				committed, reserved, leased = committed+sc.Committed, reserved+sc.Reserved, leased+sc.Leased
			}
		}
		if committed == 8000 && reserved == 0 && leased == 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the ledger counts %d committed, %d reserved and %d leased, want 8000, 0 and 0: %+v", committed, reserved, leased, v)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The task queue's ledger (its pauses) and the budget's (its counts).
	var outs []string
	for _, l := range []struct{ id, fixture string }{
		{ledger.ID(guardedQueue), ledgerFixture},
		{ledger.ShardID(guardedQueue, "refund-budget"), ledgerGuardFixture},
	} {
		runID, err := waitIdle(ctx, cl, l.id)
		if err != nil {
			return nil, err
		}
		out := file(l.fixture)
		if err := writeHistory(ctx, cl, l.id, runID, out); err != nil {
			return nil, err
		}
		outs = append(outs, out)
	}
	return outs, nil
}

// waitIdle waits until the running workflow id has no workflow task,
// activity or child in flight, and returns its run id: its history then
// ends with a completed workflow task (and what that task's commands
// recorded), as a replay needs.
func waitIdle(ctx context.Context, cl client.Client, id string) (string, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		d, err := cl.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return "", err
		}
		info := d.GetWorkflowExecutionInfo()
		if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return "", fmt.Errorf("%s is %s: the ledger never closes but to continue as new", id, info.GetStatus())
		}
		if d.GetPendingWorkflowTask() == nil && len(d.GetPendingActivities()) == 0 && len(d.GetPendingChildren()) == 0 {
			runID := info.GetExecution().GetRunId()
			last, err := lastTaskEvent(ctx, cl, id, runID)
			if err != nil || last == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
				return runID, err
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("%s: still busy after 30s", id)
}

// lastTaskEvent is the type of the last workflow-task event of a run.
func lastTaskEvent(ctx context.Context, cl client.Client, id, runID string) (enumspb.EventType, error) {
	var last enumspb.EventType
	it := cl.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return last, err
		}
		switch t := e.GetEventType(); t {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
			enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			last = t
		}
	}
	return last, nil
}

// guardedParkQueue is the guarded_park flow's task queue: its ledger is
// started with that flow's guard.
const guardedParkQueue = "toolgate-guarded-park"

// bookingGuard counts bookings toward a rate guard.
const bookingGuard = `guards:
  - {id: bookings, kind: rate, tools: [book_hotel], limit: 5, window: 1h}
`

// guardedParkFlow: a guarded call whose tool's question parks, rejected in
// the next run of the chain (rules version 17: the fleet ledger hears it).
//
//	c-1 book_hotel, a guest name that looks like SQL: reserved toward the
//	    bookings guard at the gate; alice approves it (signed); the tool asks
//	    its own question (an interrupt); refused signals grow the history
//	    past its limit, and the run continues as new with the question
//	    parked; alice rejects it (signed) in the next run, which settles
//	    the call with the ledger: released
func guardedParkFlow() flow {
	return flow{
		name: "guarded_park",
		in: workflows.RunInput{Goal: "book a room", HistoryLimit: 20, Planner: scripted("not booked",
			[]tool.Proposal{proposal("book_hotel", `{"guest":"Robert'); DROP TABLE bookings;--","hotel":"Hotel Aurora","nights":2}`)})},
		policy:      true,
		operators:   true,
		extraPolicy: bookingGuard,
		taskQueue:   guardedParkQueue,
		allRuns:     true,
		signedDrive: func(ctx context.Context, cl client.Client, id string, s *signers) error {
			res, err := s.decideSigned(ctx, cl, id, "c-1", signed.ActionApprove, "alice", nil)
			if err := wantDecision(res, err, workflows.TraceApproved); err != nil {
				return err
			}
			if _, err := waitPending(ctx, cl, id, "c-1", workflows.KindInterrupt); err != nil {
				return err
			}
			if err := growUntilContinued(ctx, cl, id); err != nil {
				return err
			}
			if _, err := waitPending(ctx, cl, id, "c-1", workflows.KindInterrupt); err != nil {
				return err
			}
			outs, err := tgclient.New(cl).Reject(ctx, id, tgclient.Decider{Approver: "alice", Key: s.keys["alice"], Text: "no, says alice"}, "c-1")
			if err != nil {
				return err
			}
			return wantDecision(outs[0].Result, outs[0].Err, workflows.TraceRejected)
		},
		status:    workflows.StatusCompleted,
		trace:     []string{"c-1 reserved", "c-1 blocked", "c-1 approved", "c-1 reserved", "c-1 interrupted", "c-1 rejected", "c-1 released"},
		approvers: []string{"alice"},
	}
}
