package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/workflows"
)

// fakePauses is a ledger's pauses as a reader sees them, on a clock the
// test moves.
type fakePauses struct {
	now    time.Time
	pauses []ledger.Pause
	err    error
	reads  int
}

func (f *fakePauses) watch() *pauseWatch {
	return &pauseWatch{queues: map[string]*queuePauses{}, now: func() time.Time { return f.now },
		read: func(_ context.Context, tq string) ([]ledger.Pause, error) {
			f.reads++
			if tq != "toolgate" {
				return nil, f.err // another queue's ledger pauses nothing
			}
			return f.pauses, f.err
		}}
}

// requirePaused fails unless err is a pause's refusal saying want.
func requirePaused(t *testing.T, err error, want string) {
	t.Helper()
	var ae *temporal.ApplicationError
	require.True(t, errors.As(err, &ae), "%v", err)
	assert.Equal(t, workflows.PausedError, ae.Type())
	assert.True(t, ae.NonRetryable())
	assert.Contains(t, ae.Message(), want)
}

// A pause stops its tool, read or not; a pause of every destructive tool
// stops those only. What the worker read is kept PauseFreshness: a pause
// reaches the next call once that is past, and no sooner read again.
func TestAPauseStopsItsToolWhereTheCallRuns(t *testing.T) {
	f := &fakePauses{now: time.Unix(1_800_000_000, 0)}
	w := f.watch()
	ctx := context.Background()
	require.NoError(t, w.check(ctx, "toolgate", "search_tickets", false))
	f.pauses = []ledger.Pause{{Tool: "search_tickets", By: "dave", Reason: "the index is corrupt", At: f.now}}
	require.NoError(t, w.check(ctx, "toolgate", "search_tickets", false), "read less than PauseFreshness ago")
	require.Equal(t, 1, f.reads)

	f.now = f.now.Add(PauseFreshness)
	requirePaused(t, w.check(ctx, "toolgate", "search_tickets", false), "not executed: search_tickets is paused fleet-wide by dave")
	require.NoError(t, w.check(ctx, "toolgate", "refund", true), "another tool")
	require.Equal(t, 2, f.reads)

	f.pauses = []ledger.Pause{{Tool: ledger.AllTools, By: "dave", Reason: "incident 42", At: f.now}}
	f.now = f.now.Add(PauseFreshness)
	requirePaused(t, w.check(ctx, "toolgate", "refund", true), "every destructive tool is paused fleet-wide by dave")
	require.NoError(t, w.check(ctx, "toolgate", "search_tickets", false), "a read, under a pause of every destructive tool")
	require.NoError(t, w.check(ctx, "other-queue", "refund", true), "another queue's ledger")
}

// A worker that cannot read the pauses goes on with what it read last for
// a few seconds, then refuses destructive calls (never reads): it does not
// guess that nothing is paused.
func TestAWorkerThatCannotLearnThePausesRefusesDestructiveCalls(t *testing.T) {
	f := &fakePauses{now: time.Unix(1_800_000_000, 0)}
	w := f.watch()
	ctx := context.Background()
	require.NoError(t, w.check(ctx, "toolgate", "refund", true))
	f.err = errors.New("authority namespace unreachable")
	f.now = f.now.Add(pauseStale)
	require.NoError(t, w.check(ctx, "toolgate", "refund", true), "what it read last is recent enough")
	f.now = f.now.Add(time.Second)
	requirePaused(t, w.check(ctx, "toolgate", "refund", true), "cannot learn the fleet's pauses of task queue toolgate (authority namespace unreachable; it read them last 6s ago)")
	require.NoError(t, w.check(ctx, "toolgate", "search_tickets", false), "a read goes on")

	never := (&fakePauses{now: f.now, err: errors.New("no ledger to read")}).watch()
	requirePaused(t, never.check(ctx, "toolgate", "refund", true), "it never read them")
	f.err = nil
	f.now = f.now.Add(PauseFreshness)
	require.NoError(t, w.check(ctx, "toolgate", "refund", true), "read again")
}
