package bench

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// The listing section on a handful of runs (the bench leaves 5,000 waiting):
// every first page lists the calls of the runs it queried, the baselines ran,
// the runs are terminated afterwards, and the table and verdicts come out.
// No timing is asserted.
func TestListingSection(t *testing.T) {
	e, ctx := sharedEnv(t), testCtx(t)
	const n = 12
	l, err := MeasureListing(ctx, e, n, 5, 1, "", nil)
	require.NoError(t, err)
	require.Equal(t, n, l.Runs)
	require.Equal(t, n, l.PendingRuns, "a page of %d runs holds all %d", ListingCLIPage, n)
	require.Equal(t, n, l.PendingCalls, "one write waits in each run")
	require.Equal(t, n, l.InboxCalls)
	require.Len(t, l.Inbox, 1)
	require.Len(t, l.Tool, 1)
	require.Len(t, l.OneRun, 1)
	if l.CLISkipped == "" {
		require.Equal(t, n, l.CLICalls)
		require.Len(t, l.CLIEmpty, 1)
	} else {
		t.Logf("toolgate pending not measured: %s", l.CLISkipped)
	}
	require.GreaterOrEqual(t, l.Legacy.Runs, 5, "the old listing ran with the baseline's 5 runs waiting")
	require.GreaterOrEqual(t, l.LegacyAll.Runs, n)
	require.Zero(t, l.Legacy.Failed, l.Legacy.Errors)
	require.Empty(t, l.LegacyAll.ListError)
	require.Len(t, l.Visibility, 5)
	for _, v := range l.Visibility {
		require.Empty(t, v.Error, "a page of %d", v.Size)
	}

	r := &Report{Config: Config{Sections: []string{SectionListing}}.withDefaults(), Listing: l}
	v := r.Verdicts()
	require.Len(t, v, 2)
	for _, v := range v {
		require.False(t, v.Ran, "%d runs are not the %d of the target: %s", n, TargetListingRuns, v.Figure)
		require.Contains(t, v.Figure, "add --listing-runs 5000")
	}
	var buf bytes.Buffer
	r.Table(&buf)
	require.Contains(t, buf.String(), "9. Listing the waiting calls: 12 AgentRuns")
	require.Contains(t, buf.String(), "| the old listing, 12 runs waiting |")
	require.Contains(t, buf.String(), "| visibility alone, the old query, a page of 1000 runs")
}
