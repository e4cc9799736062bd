package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/toolgate/toolgate/ledger"
)

// ---------------------------------------------------------------------------
// The fleet under load (issue #45): many runs at once on the guarded queue,
// every write reserved and committed with its one fleet ledger, against the
// same runs on the baseline queue. It measures calls per second, the
// longest stretch in which no call of any run was scheduled (server times),
// and the workflow tasks the ledger's runs failed or timed out in their
// histories; and it checks the budget counted every call exactly.

// FleetLoad is one measurement of concurrent runs on one queue.
type FleetLoad struct {
	Queue       string
	Runs, Calls int           // runs at once; writes a run
	Elapsed     time.Duration // first start to last close (wall clock)
	// Stall is the longest gap between two writes scheduled by any run
	// (server times), from the first.
	Stall time.Duration
}

// PerSecond is the calls per second the load made.
func (f FleetLoad) PerSecond() float64 {
	if f.Elapsed <= 0 {
		return 0
	}
	return float64(f.Runs*f.Calls) / f.Elapsed.Seconds()
}

// Fleet runs runs runs of calls writes each at once on queue, their
// arguments from first+1 (no two runs share a key), and measures them.
func Fleet(ctx context.Context, e *Env, queue string, runs, calls, first int) (FleetLoad, error) {
	f := FleetLoad{Queue: queue, Runs: runs, Calls: calls}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		errs  []error
		times []time.Time
	)
	start := time.Now()
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref, err := e.agentOn(ctx, queue, Input("", Calls(Write, first+i*calls+1, calls)))
			var h *historypb.History
			if err == nil {
				h, err = e.History(ctx, ref.ID, ref.RunID)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			for _, ev := range h.GetEvents() {
				if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == Write {
					times = append(times, ev.GetEventTime().AsTime())
				}
			}
		}()
	}
	wg.Wait()
	f.Elapsed = time.Since(start)
	if len(errs) > 0 {
		return f, fmt.Errorf("%d of %d runs failed, the first: %w", len(errs), runs, errs[0])
	}
	if len(times) != runs*calls {
		return f, fmt.Errorf("%d writes scheduled, want %d", len(times), runs*calls)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(times); i++ {
		f.Stall = max(f.Stall, times[i].Sub(times[i-1]))
	}
	return f, nil
}

// LedgerTaskFailures counts the workflow tasks that failed or timed out in
// every run of queue's fleet ledgers, the task queue's and each guard's
// (following continue-as-new back from the current run), by cause, and the
// runs it read.
func LedgerTaskFailures(ctx context.Context, e *Env, queue string) (failures map[string]int, runs int, err error) {
	failures = map[string]int{}
	v, err := ledger.Guards(ctx, e.Authority.Client, queue)
	if err != nil {
		return failures, 0, fmt.Errorf("the ledger's guards: %w", err)
	}
	ids := []string{ledger.ID(queue)}
	for _, g := range v.Guards {
		ids = append(ids, ledger.ShardID(queue, g.ID))
	}
	for _, id := range ids {
		n, err := taskFailures(ctx, e, id, failures)
		if runs += n; err != nil {
			return failures, runs, err
		}
	}
	return failures, runs, nil
}

// taskFailures adds the failed and timed-out workflow tasks of every run of
// the ledger wid to failures, and returns the runs it read (none when the
// ledger never ran).
func taskFailures(ctx context.Context, e *Env, wid string, failures map[string]int) (runs int, err error) {
	ns := e.Authority.Namespace
	runID := ""
	for {
		var h historypb.History
		var token []byte
		for {
			resp, err := e.Authority.Client.WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
				Namespace: ns, Execution: &commonpb.WorkflowExecution{WorkflowId: wid, RunId: runID}, NextPageToken: token})
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) && runID == "" {
				return 0, nil
			}
			if err != nil {
				return runs, fmt.Errorf("the history of ledger %s: %w", wid, err)
			}
			h.Events = append(h.Events, resp.GetHistory().GetEvents()...)
			if token = resp.GetNextPageToken(); len(token) == 0 {
				break
			}
		}
		runs++
		for _, ev := range h.GetEvents() {
			if a := ev.GetWorkflowTaskFailedEventAttributes(); a != nil {
				msg := a.GetFailure().GetMessage()
				if len(msg) > 80 {
					msg = msg[:80]
				}
				failures[fmt.Sprintf("%s: failed: %s: %s", wid, a.GetCause(), msg)]++
			}
			if a := ev.GetWorkflowTaskTimedOutEventAttributes(); a != nil {
				failures[wid+": timed out: "+a.GetTimeoutType().String()]++
			}
		}
		prev := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		if prev == "" {
			return runs, nil
		}
		runID = prev
	}
}

// Committed reads what the budget of queue's ledger holds (its one guard,
// scope all), waiting up to 10 s for it to hold want committed and nothing
// reserved or leased: the worker reports its last commits, and returns its
// lease, at its next renewals (a second apart) after the runs closed.
func Committed(ctx context.Context, e *Env, queue string, want int64) (ledger.ScopeView, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := ledger.Guards(ctx, e.Authority.Client, queue)
		if err != nil {
			return ledger.ScopeView{}, err
		}
		if len(v.Guards) != 1 || len(v.Guards[0].Scopes) != 1 {
			return ledger.ScopeView{}, fmt.Errorf("the ledger of %s shows %d guards, want the budget with one scope: %+v", queue, len(v.Guards), v.Guards)
		}
		got := v.Guards[0].Scopes[0]
		if (got.Committed == want && got.Reserved == 0 && got.Leased == 0) || time.Now().After(deadline) {
			return got, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// FleetTable writes guarded against baseline loads, side by side.
func FleetTable(w io.Writer, base, guarded []FleetLoad) {
	fmt.Fprintf(w, "| runs at once | calls | baseline calls/s | guarded calls/s | guarded ÷ baseline | longest stall, baseline | longest stall, guarded |\n")
	fmt.Fprintf(w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for i := range min(len(base), len(guarded)) {
		b, g := base[i], guarded[i]
		ratio := 0.0
		if b.PerSecond() > 0 {
			ratio = g.PerSecond() / b.PerSecond()
		}
		fmt.Fprintf(w, "| %d | %d | %.1f | %.1f | %.2f | %s | %s |\n", g.Runs, g.Runs*g.Calls, b.PerSecond(), g.PerSecond(), ratio, dur(b.Stall), dur(g.Stall))
	}
}
