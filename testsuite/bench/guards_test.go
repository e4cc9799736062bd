package bench

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ledger"
)

// TestGuardsHarness runs the guard's measurement with tiny numbers and
// checks that it measured real calls: every latency positive, each
// guarded write reserved and committed (two ledger activities a call, the
// ledger's budget holding their amounts), and no baseline run nor guarded
// read consulting the ledger. No timing is asserted.
func TestGuardsHarness(t *testing.T) {
	e, ctx := sharedEnv(t), testCtx(t)
	q, err := StartGuardQueues(e)
	require.NoError(t, err)
	t.Cleanup(q.Stop)
	const calls, rounds = 4, 2
	g, err := MeasureGuards(ctx, e, q, calls, rounds, nil)
	require.NoError(t, err)
	require.Equal(t, rounds, g.Rounds)
	for name, s := range g.Series() {
		require.Len(t, *s, rounds*(calls-1), name)
		for _, d := range *s {
			require.Positive(t, d, name)
		}
	}
	// Rules version 12: each guarded write is reserved and, once it ran,
	// committed, each a local activity of the worker.
	require.Equal(t, map[string]int{SeriesGuardedWrite: 2 * calls * rounds, SeriesBaselineWrite: 0, SeriesBaselineRead: 0, SeriesGuardedRead: 0},
		g.LedgerActivities)
	// A guarded write run reserves and commits each call by local
	// activities (markers): the writes are its only activities.
	require.Len(t, g.Hops[Write], (calls-1)*rounds)

	// The warm-up's writes (n 1..5) and each round's (n from (i+1)*calls*10+1)
	// are committed toward the budget.
	want := int64(1 + 2 + 3 + 4 + 5)
	for i := range rounds {
		for n := range calls {
			want += int64((i+1)*calls*10 + n + 1)
		}
	}
	v, err := ledger.Guards(ctx, e.Authority.Client, q.Guarded)
	require.NoError(t, err)
	require.Len(t, v.Guards, 1)
	require.Equal(t, GuardBudget, v.Guards[0].ID)
	// The worker reports what its lease spent, and returns the rest, at
	// its next renewals.
	got, err := Committed(ctx, e, q.Guarded, want)
	require.NoError(t, err)
	require.Equal(t, ledger.ScopeView{Scope: "all", Committed: want}, got)
	_, err = ledger.Guards(ctx, e.Authority.Client, q.Baseline)
	require.ErrorIs(t, err, ledger.ErrNotStarted, "the baseline's runs never started its ledger")
}

// BenchmarkGuardedCall: what a budget guard adds to a destructive call (a
// reservation and a commit through the fleet ledger), against the same
// policy without it, in the same rounds; and that it adds nothing to a read
// it does not cover. Each b.N iteration is one round of four runs of
// guardedCalls calls (use -benchtime Nx); the figures are over every
// round's calls. The table is printed to stdout.
func BenchmarkGuardedCall(b *testing.B) {
	const guardedCalls = 200
	e, ctx := sharedEnv(b), context.Background()
	q, err := StartGuardQueues(e)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Stop()
	if err := WarmUpGuards(ctx, e, q); err != nil {
		b.Fatal(err)
	}
	g := GuardCost{Calls: guardedCalls, LedgerActivities: map[string]int{}}
	for i := 0; b.Loop(); i++ {
		if err := g.Round(ctx, e, q, guardedCalls, (i+1)*guardedCalls*10, i%2 == 1); err != nil {
			b.Fatal(err)
		}
	}
	write50, read50 := g.Added(50)
	write99, read99 := g.Added(99)
	ms := func(d float64) float64 { return d / 1e6 }
	b.ReportMetric(ms(float64(Percentile(g.BaselineWrite, 50))), "write_base_p50_ms")
	b.ReportMetric(ms(float64(Percentile(g.GuardedWrite, 50))), "write_guarded_p50_ms")
	b.ReportMetric(ms(float64(write50)), "write_added_p50_ms")
	b.ReportMetric(ms(float64(write99)), "write_added_p99_ms")
	b.ReportMetric(ms(float64(read50)), "read_added_p50_ms")
	b.ReportMetric(ms(float64(read99)), "read_added_p99_ms")
	g.GuardsTable(os.Stdout)
}
