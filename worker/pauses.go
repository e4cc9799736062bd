package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/authority"
	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/workflows"
)

// A pause stops every new execution of its tool, reads included, whatever
// path the call took (the gate, a tool's own question, a fallback, a
// retry, a door): the worker checks it where the call is about to run —
// when it signs the call's permit, and when it runs the tool's activity —
// against the fleet ledger's pauses, read from the ledger's memo
// (ledger.ReadPauses) at most PauseFreshness ago. A worker that cannot
// read them refuses destructive calls rather than guess.

// PauseFreshness is how old a worker's knowledge of the pauses may be when
// a call is about to run: a pause reaches every worker's calls within it.
const PauseFreshness = ledger.PauseFreshness

// pauseStale is how long a worker that cannot read the pauses goes on
// with what it read last before it refuses destructive calls.
const pauseStale = 5 * time.Second

// pauseReadTimeout bounds one read of the pauses.
const pauseReadTimeout = 2 * time.Second

// pauseReader reads the pauses of the ledger of a task queue.
type pauseReader func(ctx context.Context, taskQueue string) ([]ledger.Pause, error)

// pauseWatch is what one worker knows of the pauses of each task queue's
// ledger, read on demand and kept PauseFreshness.
type pauseWatch struct {
	read pauseReader
	now  func() time.Time

	mu     sync.Mutex
	queues map[string]*queuePauses
}

// queuePauses is the last read of one queue's pauses.
type queuePauses struct {
	mu      sync.Mutex // held while reading: one read at a time per queue
	pauses  []ledger.Pause
	readAt  time.Time // the last read that succeeded
	tried   time.Time // the last read tried
	lastErr error
}

// newPauseWatch reads the pauses in conn's namespace (the authority
// namespace), or — for a worker with none — with the activity's own client
// in its namespace, decoding the memo with dc.
func newPauseWatch(conn *authority.Conn, dc converter.DataConverter) *pauseWatch {
	read := func(ctx context.Context, tq string) ([]ledger.Pause, error) {
		var c client.Client
		ns := ""
		if conn != nil {
			c, ns = conn.Client, conn.Namespace
		} else if activity.IsActivity(ctx) {
			c = activity.GetClient(ctx)
		}
		if c == nil {
			return nil, errors.New("no Temporal client to read the fleet ledger with")
		}
		pauses, err := ledger.ReadPauses(ctx, c, ns, tq, dc)
		if errors.Is(err, ledger.ErrNoPauseMemo) && conn == nil {
			return nil, nil // a worker with no authority namespace and a ledger of old rules: as before, the ledger alone says
		}
		return pauses, err
	}
	return &pauseWatch{read: read, now: time.Now, queues: map[string]*queuePauses{}}
}

// queue is the state of task queue tq's pauses.
func (w *pauseWatch) queue(tq string) *queuePauses {
	w.mu.Lock()
	defer w.mu.Unlock()
	q, ok := w.queues[tq]
	if !ok {
		q = &queuePauses{}
		w.queues[tq] = q
	}
	return q
}

// readNow reads tq's pauses within pauseReadTimeout; a reader that panics
// (a client that is no client) is a read that failed.
func (w *pauseWatch) readNow(ctx context.Context, tq string) (pauses []ledger.Pause, err error) {
	rctx, cancel := context.WithTimeout(ctx, pauseReadTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading the fleet's pauses: %v", r)
		}
	}()
	return w.read(rctx, tq)
}

// check refuses a call of toolName (destructive or not) about to run for a
// run of task queue tq when the fleet ledger pauses it, or — a destructive
// call — when the worker cannot learn the pauses: a non-retryable error of
// type workflows.PausedError saying why.
func (w *pauseWatch) check(ctx context.Context, tq, toolName string, destructive bool) error {
	if w == nil || tq == "" {
		return nil
	}
	q := w.queue(tq)
	q.mu.Lock()
	defer q.mu.Unlock()
	now := w.now()
	if now.Sub(q.tried) >= PauseFreshness {
		pauses, err := w.readNow(ctx, tq)
		q.tried, q.lastErr = now, err
		if err == nil {
			q.pauses, q.readAt = pauses, now
		}
	}
	if q.lastErr != nil && now.Sub(q.readAt) > pauseStale {
		if !destructive {
			return nil
		}
		since := "never read them"
		if !q.readAt.IsZero() {
			since = fmt.Sprintf("read them last %s ago", now.Sub(q.readAt).Round(time.Second))
		}
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"%s not executed: this worker cannot learn the fleet's pauses of task queue %s (%v; it %s), so it refuses destructive calls rather than guess",
			toolName, tq, q.lastErr, since), workflows.PausedError, nil)
	}
	if p, ok := ledger.PausedBy(q.pauses, toolName, destructive); ok {
		return temporal.NewNonRetryableApplicationError("not executed: "+ledger.PausedReason(p, toolName), workflows.PausedError, nil)
	}
	return nil
}
