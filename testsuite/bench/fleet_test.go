package bench

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

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
	v, err := ledger.Guards(ctx, e.Authority.Client, q.Guarded)
	require.NoError(t, err)
	require.Equal(t, ledger.ScopeView{Scope: "all", Committed: int64(runs * calls * (runs*calls + 1) / 2)}, v.Guards[0].Scopes[0],
		"the budget holds every write's amount (1 to %d), once", runs*calls)
	failed, ledgerRuns, err := LedgerTaskFailures(ctx, e, q.Guarded)
	require.NoError(t, err)
	require.Positive(t, ledgerRuns)
	require.Empty(t, failed)
}

// BenchmarkGuardedFleet: guarded calls per second against unguarded at 1,
// 10 and 50 runs at once (each b.N iteration runs every level on both
// queues; use -benchtime 1x), the longest stretch with no call scheduled,
// and the workflow tasks the ledger failed. The table goes to stdout.
func BenchmarkGuardedFleet(b *testing.B) {
	const calls = 20
	e, ctx := sharedEnv(b), context.Background()
	q, err := StartGuardQueues(e)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Stop()
	if err := WarmUpGuards(ctx, e, q); err != nil {
		b.Fatal(err)
	}
	var base, guarded []FleetLoad
	first := 1000
	for b.Loop() {
		for _, runs := range []int{1, 10, 50} {
			for _, queue := range []string{q.Baseline, q.Guarded} {
				f, err := Fleet(ctx, e, queue, runs, calls, first)
				if err != nil {
					b.Fatal(err)
				}
				first += runs * calls
				if queue == q.Guarded {
					guarded = append(guarded, f)
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
	n := 0
	for _, c := range failed {
		n += c
	}
	b.ReportMetric(float64(n), "ledger_failed_tasks")
	FleetTable(os.Stdout, base, guarded)
	b.Logf("the ledger: %d runs, %d workflow tasks failed or timed out in their histories: %v", ledgerRuns, n, failed)
}
