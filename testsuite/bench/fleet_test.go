package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/toolgate/toolgate/ledger"
)

// TestFleetHarness runs the fleet's measurement with tiny numbers and
// checks it measured real calls: every write scheduled, the budget
// committed for each exactly, the ledger's histories read. No timing is
// asserted.
func TestFleetHarness(t *testing.T) {
	e, ctx := sharedEnv(t), testCtx(t)
	q, err := StartGuardQueues(e)
	require.NoError(t, err)
	t.Cleanup(q.Stop)
	const runs, calls = 3, 2
	g, err := Fleet(ctx, e, q.Guarded, runs, calls, 0)
	require.NoError(t, err)
	require.Positive(t, g.PerSecond())
	b, err := Fleet(ctx, e, q.Baseline, runs, calls, 0)
	require.NoError(t, err)
	require.Positive(t, b.PerSecond())
	want := int64(runs * calls * (runs*calls + 1) / 2)
	got, err := Committed(ctx, e, q.Guarded, want)
	require.NoError(t, err)
	require.Equal(t, ledger.ScopeView{Scope: "all", Committed: want}, got, "the budget holds every write's amount (1 to %d), once", runs*calls)
	failed, ledgerRuns, err := LedgerTaskFailures(ctx, e, q.Guarded)
	require.NoError(t, err)
	require.Positive(t, ledgerRuns)
	require.Empty(t, failed)
	require.Zero(t, WorkflowTaskFailures(ledger.WorkflowName), "no ledger workflow task failed in the worker's log")
}

// The fleet benchmark's sizes: -fleet.runs lists the runs at once of each
// level, -fleet.calls the writes of each run.
var (
	fleetRuns  = flag.String("fleet.runs", "1,10,50", "BenchmarkGuardedFleet: runs at once, level by level")
	fleetCalls = flag.Int("fleet.calls", 20, "BenchmarkGuardedFleet: writes a run")
	fleetBase  = flag.Bool("fleet.baseline", true, "BenchmarkGuardedFleet: measure the baseline queue too (false: the guarded queue only, to look at the ledger)")
	fleetWork  = flag.Int("fleet.workers", 1, "BenchmarkGuardedFleet: workers on each queue, each with leases of its own (as worker processes)")
)

// BenchmarkGuardedFleet: guarded calls per second against unguarded at 1,
// 10 and 50 runs at once (each b.N iteration runs every level on both
// queues; use -benchtime 1x), the longest stretch with no call scheduled,
// and the workflow tasks the ledger failed. The table goes to stdout.
func BenchmarkGuardedFleet(b *testing.B) {
	calls := *fleetCalls
	var levels []int
	for _, f := range strings.Split(*fleetRuns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("-fleet.runs %q: want runs at once, such as 1,10,50", *fleetRuns)
		}
		levels = append(levels, n)
	}
	e, ctx := sharedEnv(b), context.Background()
	q, err := StartGuardQueuesWith(e, *fleetWork)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Stop()
	if err := WarmUpGuards(ctx, e, q); err != nil {
		b.Fatal(err)
	}
	var base, guarded []FleetLoad
	first := 1000
	want := int64(1 + 2 + 3 + 4 + 5) // the warm-up's writes, amounts 1 to 5
	for b.Loop() {
		for _, runs := range levels {
			queues := []string{q.Baseline, q.Guarded}
			if !*fleetBase {
				queues = queues[1:]
			}
			for _, queue := range queues {
				stop := make(chan struct{})
				if queue == q.Guarded {
					go watchLedger(ctx, e, queue, stop)
				}
				f, err := Fleet(ctx, e, queue, runs, calls, first)
				close(stop)
				if err != nil {
					b.Fatal(err)
				}
				fmt.Fprintf(os.Stderr, "fleet: %s, %d runs of %d calls: %.1f calls/s, longest stall %s\n", queue, runs, calls, f.PerSecond(), dur(f.Stall))
				first += runs * calls
				if queue == q.Guarded {
					guarded = append(guarded, f)
					for n := first - runs*calls + 1; n <= first; n++ {
						want += int64(n)
					}
				} else {
					base = append(base, f)
				}
			}
		}
	}
	failed, ledgerRuns, err := LedgerTaskFailures(ctx, e, q.Guarded)
	if err != nil {
		b.Fatal(err)
	}
	got, err := Committed(ctx, e, q.Guarded, want)
	if err != nil {
		b.Fatal(err)
	}
	if got.Committed != want || got.Reserved != 0 || got.Leased != 0 {
		b.Fatalf("the budget holds %d committed, %d reserved and %d leased, want every write's amount once: %d committed", got.Committed, got.Reserved, got.Leased, want)
	}
	n := 0
	for _, c := range failed {
		n += c
	}
	logged := WorkflowTaskFailures(ledger.WorkflowName)
	b.ReportMetric(float64(n), "ledger_failed_tasks")
	b.ReportMetric(float64(logged), "ledger_failed_tasks_logged")
	fmt.Fprintf(os.Stdout, "%d worker(s) a queue, each with leases of its own\n\n", *fleetWork)
	FleetTable(os.Stdout, base, guarded)
	b.Logf("the ledgers: %d runs, %d workflow tasks failed or timed out in their histories (%v), %d failed in the worker's log", ledgerRuns, n, failed, logged)
	// The fleet's invariants (issue #45), whatever the speed: CI runs this
	// at 50 runs of 200 calls.
	if n > 0 || logged > 0 {
		b.Errorf("the ledger failed workflow tasks: %d in its histories, %d in the worker's log", n, logged)
	}
	for _, g := range guarded {
		if g.Stall >= 10*time.Second {
			b.Errorf("%d runs of %d guarded calls: no call was scheduled for %s", g.Runs, g.Calls, dur(g.Stall))
		}
	}
}

// watchLedger prints, every 5 s until stop, what queue's ledger holds and
// how long its history is: where a slow level spends its time.
func watchLedger(ctx context.Context, e *Env, queue string, stop <-chan struct{}) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		line := fmt.Sprintf("fleet: %s after %s:", queue, time.Since(start).Round(time.Second))
		wid := ledger.ID(queue)
		if v, err := ledger.Guards(ctx, e.Authority.Client, queue); err != nil {
			line += " guards: " + err.Error()
		} else if len(v.Guards) > 0 && len(v.Guards[0].Scopes) > 0 {
			sc := v.Guards[0].Scopes[0]
			line += fmt.Sprintf(" committed %d, reserved %d", sc.Committed, sc.Reserved)
			wid = ledger.ShardID(queue, v.Guards[0].ID) // the budget's ledger: the busy one
		}
		if d, err := e.Authority.Client.DescribeWorkflowExecution(ctx, wid, ""); err == nil {
			line += fmt.Sprintf("; ledger run %s: %d events", d.GetWorkflowExecutionInfo().GetExecution().GetRunId(), d.GetWorkflowExecutionInfo().GetHistoryLength())
			if wt := d.GetPendingWorkflowTask(); wt != nil {
				line += fmt.Sprintf("; workflow task %s, attempt %d, scheduled %s ago", wt.GetState(), wt.GetAttempt(), time.Since(wt.GetScheduledTime().AsTime()).Round(time.Millisecond))
			}
		}
		if d, err := e.Authority.Client.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_WORKFLOW); err == nil {
			line += fmt.Sprintf("; %d workflow pollers", len(d.GetPollers()))
		}
		fmt.Fprintln(os.Stderr, line)
	}
}

// The benchmark's logger counts the workflow tasks a worker failed, by
// workflow type, as the SDK logs them.
func TestTheLoggerCountsFailedWorkflowTasks(t *testing.T) {
	before := WorkflowTaskFailures("CountedWorkflow")
	quietLogger().Warn("Failed to process workflow task.", "Namespace", "default", "WorkflowType", "CountedWorkflow", "Error", "history_events: premature end of stream")
	quietLogger().Warn("Something else.", "WorkflowType", "CountedWorkflow")
	require.Equal(t, before+1, WorkflowTaskFailures("CountedWorkflow"))
}
