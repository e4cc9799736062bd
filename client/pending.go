package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/toolgate/toolgate/workflows"
)

// Listing defaults.
const (
	// DefaultPageSize is the number of runs a page of Pending holds when
	// PendingOptions.PageSize is 0.
	DefaultPageSize = 100
	// MaxPageSize is the most runs one page of Pending may ask for. (The
	// embedded server reads search attribute definitions through to its
	// database for every run it lists: a page of 500 runs exceeds its
	// persistence rate limit and fails. BENCHMARKS.md, section 9.)
	MaxPageSize = 200
	// DefaultQueryTimeout bounds the queries of one run while listing
	// (WithQueryTimeout).
	DefaultQueryTimeout = 2 * time.Second
	// ListParallelism is how many runs of a page are queried at once.
	ListParallelism = 8
)

// WithQueryTimeout bounds the queries of each run Pending lists (default
// DefaultQueryTimeout): a run that does not answer in time is named in
// PendingPage.Failed and costs no other run its place.
func WithQueryTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.queryTimeout = d
		}
	}
}

// PendingCall is one call waiting for a decision, in some run.
type PendingCall struct {
	RunID string `json:"run"`
	// Policy: the run is under the worker's approval policy, so a decision
	// on this call must be signed (state.policy).
	Policy bool `json:"policy,omitempty"`
	// Goal is the run's goal.
	Goal string `json:"goal,omitempty"`
	workflows.Interrupt
}

// RunFailure is a run whose state could not be queried.
type RunFailure struct {
	RunID string `json:"run"`
	Error string `json:"error"`
	// Unreadable: the query answered, and its answer cannot be decoded
	// (ErrUnreadable: a worker that encrypts payloads with a key this
	// client lacks): no worker is missing.
	Unreadable bool `json:"unreadable,omitempty"`
}

// PendingPage is one page of waiting calls across runs.
type PendingPage struct {
	Calls []PendingCall
	// Failed names the runs of this page whose state query failed (their
	// calls are missing here; every other run's are listed).
	Failed []RunFailure
	// Runs counts the runs listed on this page (queried or failed).
	Runs int
	// NextPageToken asks for the next page; empty on the last.
	NextPageToken []byte
	// Traces (with PendingOptions.TraceRecords) holds each queried run's
	// most recent trace records, oldest first; TraceErrors says why a run's
	// trace could not be read.
	Traces      map[string][]workflows.TraceRecord
	TraceErrors map[string]string
}

// PendingOptions select and page the runs waiting for a decision.
type PendingOptions struct {
	PageSize  int    // runs per page (0: DefaultPageSize; at most MaxPageSize)
	PageToken []byte // from the previous page, asked with the same options
	// TaskQueues are the task queues whose runs are listed (none: the
	// Client's, WithTaskQueue). A run started on any other queue — one no
	// worker of this deployment polls — is never listed nor queried.
	TaskQueues []string
	// Tool lists only the runs waiting on a call of this tool, and only
	// those calls. With toolgate's search attributes the runs are chosen by
	// visibility (ToolgatePendingTools), so no other run is queried.
	Tool string
	// RunID lists only the run with this workflow id.
	RunID string
	// TraceRecords > 0 also reads each listed run's trace and keeps its
	// last TraceRecords records (PendingPage.Traces).
	TraceRecords int
}

// Pending lists the calls waiting for a decision across runs, one page of
// runs at a time, newest first, querying only the runs of that page.
//
// It lists running AgentRuns of the task queues in opts (default: the
// Client's) only. With toolgate's search attributes it asks visibility for
// the runs waiting for approval (and, with opts.Tool, waiting on that tool);
// without them, for every running AgentRun of those queues, filtering the
// calls by tool after querying. The runs of a page are queried concurrently
// (ListParallelism at once), each under its own deadline (WithQueryTimeout),
// and listed in visibility's order: a run whose query fails or times out does
// not hide the others, it is named in Failed. The error is for a failed
// listing or bad options.
func (c *Client) Pending(ctx context.Context, opts PendingOptions) (PendingPage, error) {
	if opts.PageSize < 0 || opts.PageSize > MaxPageSize {
		return PendingPage{}, fmt.Errorf("page size %d: want 1 to %d runs (0: %d)", opts.PageSize, MaxPageSize, DefaultPageSize)
	}
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	queues := opts.TaskQueues
	if len(queues) == 0 {
		queues = []string{c.taskQueue}
	}
	all, err := runsQuery(queues, opts.RunID)
	if err != nil {
		return PendingPage{}, err
	}
	// Runs that keep toolgate's search attributes current are looked up by
	// them; a run whose worker keeps none (a worker of one's own whose
	// options leave SearchAttributes off) has no ToolgateStatus, and is
	// queried like every run on a namespace without them.
	kept := workflows.SearchAttrStatus + " = " + quote(workflows.StatusWaitingForApproval)
	if opts.Tool != "" {
		kept = "(" + kept + " AND " + workflows.SearchAttrPendingTools + " = " + quote(opts.Tool) + ")"
	}
	waiting := all + " AND (" + kept + " OR " + workflows.SearchAttrStatus + " IS NULL)"
	req := &workflowservice.ListWorkflowExecutionsRequest{Query: waiting, PageSize: int32(opts.PageSize), NextPageToken: opts.PageToken}
	resp, err := c.tc.ListWorkflow(ctx, req)
	if err != nil {
		// Without toolgate's search attributes (a namespace that lacks
		// them): every running AgentRun of these queues.
		req.Query = all
		var errAll error
		if resp, errAll = c.tc.ListWorkflow(ctx, req); errAll != nil {
			return PendingPage{}, fmt.Errorf("listing runs: %w", errors.Join(errAll, fmt.Errorf("with toolgate's search attributes: %w", err)))
		}
	}
	runs := resp.GetExecutions()
	page := PendingPage{Calls: []PendingCall{}, Runs: len(runs), NextPageToken: resp.GetNextPageToken()}
	results := make([]runResult, len(runs))
	sem := make(chan struct{}, ListParallelism)
	var wg sync.WaitGroup
	for i, e := range runs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i] = c.pendingOf(ctx, e.GetExecution().GetWorkflowId(), e.GetTaskQueue(), opts.TraceRecords)
		}()
	}
	wg.Wait()
	if opts.TraceRecords > 0 {
		page.Traces, page.TraceErrors = map[string][]workflows.TraceRecord{}, map[string]string{}
	}
	for _, r := range results {
		if r.err != nil {
			page.Failed = append(page.Failed, RunFailure{RunID: r.id, Error: r.err.Error(), Unreadable: errors.Is(r.err, ErrUnreadable)})
			continue
		}
		for _, it := range r.state.Interrupts {
			if opts.Tool == "" || it.Tool == opts.Tool {
				page.Calls = append(page.Calls, PendingCall{RunID: r.id, Policy: r.state.Policy, Goal: r.state.Goal, Interrupt: it})
			}
		}
		if opts.TraceRecords > 0 {
			if r.traceErr != nil {
				page.TraceErrors[r.id] = r.traceErr.Error()
			} else {
				page.Traces[r.id] = r.trace[max(0, len(r.trace)-opts.TraceRecords):]
			}
		}
	}
	return page, nil
}

// runResult is what the queries of one listed run gave.
type runResult struct {
	id       string
	state    workflows.State
	err      error
	trace    []workflows.TraceRecord
	traceErr error
}

// pendingOf queries one listed run's state (and, with traceRecords, its
// trace) under the per-run deadline.
func (c *Client) pendingOf(ctx context.Context, id, queue string, traceRecords int) runResult {
	r := runResult{id: id}
	// The deadline is a cancellation, not a context deadline: the SDK gives
	// a call only half of the time its context has left (and at least 1 s).
	late := fmt.Errorf("no answer within %v", c.queryTimeout)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(c.queryTimeout, func() { cancel(late) })
	defer timer.Stop()
	explain := func(what string, err error) error {
		if context.Cause(ctx) == late {
			return fmt.Errorf("its %s query did not answer within %v (is a toolgate worker polling task queue %q?): %w", what, c.queryTimeout, queue, err)
		}
		return err
	}
	if r.err = c.query(ctx, id, workflows.QueryState, &r.state); r.err != nil { // no look at a failed run's history: a listing stays quick
		r.err = explain("state", r.err)
		return r
	}
	if traceRecords > 0 && len(r.state.Interrupts) > 0 {
		if r.trace, r.traceErr = c.Trace(ctx, id); r.traceErr != nil {
			r.traceErr = explain("trace", r.traceErr)
		}
	}
	return r
}

// runsQuery is the visibility query of the running AgentRuns of queues (and
// of run id, if set).
func runsQuery(queues []string, id string) (string, error) {
	var qs []string
	for _, q := range queues {
		if q == "" {
			return "", errors.New("a task queue to list has no name")
		}
		qs = append(qs, quote(q))
	}
	query := fmt.Sprintf("WorkflowType = %s AND ExecutionStatus = 'Running' AND TaskQueue IN (%s)",
		quote(workflows.WorkflowName), strings.Join(qs, ", "))
	if id != "" {
		query += " AND WorkflowId = " + quote(id)
	}
	return query, nil
}

// quote is s as a string literal of Temporal's visibility query language.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// AllPending is Pending over every page (of the Client's task queue). Its
// error is for a failed listing, or when runs were found and none of them
// could be queried.
func (c *Client) AllPending(ctx context.Context) (PendingPage, error) {
	return c.AllPendingWith(ctx, PendingOptions{})
}

// AllPendingWith is Pending over every page from opts.PageToken on. Its
// error is for a failed listing, or when runs were found and none of them
// could be queried.
func (c *Client) AllPendingWith(ctx context.Context, opts PendingOptions) (PendingPage, error) {
	all := PendingPage{Calls: []PendingCall{}}
	for {
		page, err := c.Pending(ctx, opts)
		if err != nil {
			return all, err
		}
		all.Calls = append(all.Calls, page.Calls...)
		all.Failed = append(all.Failed, page.Failed...)
		all.Runs += page.Runs
		for id, tr := range page.Traces {
			if all.Traces == nil {
				all.Traces = map[string][]workflows.TraceRecord{}
			}
			all.Traces[id] = tr
		}
		for id, e := range page.TraceErrors {
			if all.TraceErrors == nil {
				all.TraceErrors = map[string]string{}
			}
			all.TraceErrors[id] = e
		}
		if len(page.NextPageToken) == 0 {
			break
		}
		opts.PageToken = page.NextPageToken
	}
	if err := NoneQueried(all); err != nil {
		return all, err
	}
	return all, nil
}

// NoneQueried is the error of a page (or pages) on which runs were found
// and none of them could be queried; nil otherwise. When every run answered
// with what this client cannot decode, it is of kind ErrUnreadable.
func NoneQueried(p PendingPage) error {
	if p.Runs == 0 || len(p.Failed) != p.Runs {
		return nil
	}
	unreadable := 0
	for _, f := range p.Failed {
		if f.Unreadable {
			unreadable++
		}
	}
	switch unreadable {
	case len(p.Failed):
		return refused(ErrUnreadable, fmt.Sprintf("none of the %d runs found could be read: their state cannot be decoded "+
			"(a worker that encrypts payloads with a key this client lacks?)", p.Runs))
	case 0:
		return fmt.Errorf("none of the %d runs found could be queried (is a toolgate worker running on their task queue?)", p.Runs)
	}
	return fmt.Errorf("none of the %d runs found could be queried: the state of %d cannot be decoded (a worker that encrypts payloads with a key "+
		"this client lacks?); the others did not answer (is a toolgate worker running on their task queue?)", p.Runs, unreadable)
}
