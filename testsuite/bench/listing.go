package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/inbox"
	"github.com/toolgate/toolgate/workflows"
)

// ---------------------------------------------------------------------------
// 9. Listing the waiting calls (issue #20, item 10): with thousands of runs
// waiting for a decision, the first page of client.Pending, of the inbox's
// API and of `toolgate pending`, against the listing that queried every
// waiting run one after the other.

// Targets of issue #20 (reported, never asserted in tests).
const (
	// TargetListing: with TargetListingRuns runs waiting, the inbox's first
	// page and `toolgate pending`'s first page answer within it.
	TargetListing     = time.Second
	TargetListingRuns = 5000
	// ListingCLIPage is the page `toolgate pending` lists by default.
	ListingCLIPage = 50
)

// Listing is section 9.
type Listing struct {
	Runs      int           // runs waiting for a decision (one write each)
	StartTook time.Duration // starting them until visibility shows them all waiting
	Repeats   int
	// First pages, each timed Repeats times (client clock):
	List    []time.Duration // visibility alone: ListWorkflow, one page of ListingCLIPage runs
	Pending []time.Duration // client.Pending, a page of ListingCLIPage runs (state queries)
	Inbox   []time.Duration // GET /api/pending: the inbox's default page (state and trace queries)
	Tool    []time.Duration // GET /api/pending?tool=write: the same, filtered by visibility
	CLI     []time.Duration // `toolgate pending --json`, the whole process (start, dial, list, print)
	// CLIEmpty is `toolgate pending --json` on a queue with no run: the
	// process's own cost (start, dial, one empty listing).
	CLIEmpty   []time.Duration
	CLISkipped string // why the CLI was not measured
	// Calls listed by one first page of each, and the runs queried for it.
	PendingCalls, InboxCalls, CLICalls int
	PendingRuns, InboxRuns             int
	// Baselines in the same run: one run's state query, and the listing
	// before this release (every waiting run listed, then queried one after
	// the other) stopped after the baseline's runs, and over all of them.
	OneRun    []time.Duration
	Legacy    LegacyListing // with the baseline's runs waiting, before the others were started
	LegacyAll LegacyListing // with all Runs waiting
	// Visibility is the old query's listing alone at several page sizes
	// (the old listing asked for the server's default, 1,000).
	Visibility []VisibilityPage
}

// MeasureListing measures the old listing with baseline runs waiting (its
// baseline), then leaves n runs waiting in all, times the first pages
// (repeats times each), the visibility listing alone at several page sizes
// and the old listing over all n, then terminates the runs. bin is a
// toolgate binary ("": build one; a failed build skips the CLI rows).
func MeasureListing(ctx context.Context, e *Env, n, baseline, repeats int, bin string, log io.Writer) (Listing, error) {
	l := Listing{Runs: n, Repeats: repeats}
	baseline = min(baseline, n)
	var ids []string
	defer func() { terminate(e, ids, log) }()
	began := time.Now()
	if baseline > 0 {
		more, err := startWaiting(ctx, e, 0, baseline, log)
		ids = append(ids, more...)
		if err != nil {
			return l, err
		}
		if l.Legacy, err = legacyPending(ctx, e); err != nil {
			return l, fmt.Errorf("the old listing over %d runs: %w", baseline, err)
		}
		logf(log, "listing: the old listing, %d runs waiting: %s, %d failed %q", l.Legacy.Runs, dur(l.Legacy.Took), l.Legacy.Failed, l.Legacy.Errors)
	}
	more, err := startWaiting(ctx, e, baseline, n, log)
	ids = append(ids, more...)
	if err != nil {
		return l, err
	}
	l.StartTook = time.Since(began)
	logf(log, "listing: %d runs waiting after %v", n, l.StartTook.Round(time.Second))

	tg := tgclient.New(e.Client, tgclient.WithTaskQueue(TaskQueue))
	srv := httptest.NewServer(inbox.New(tg, inbox.Options{}))
	defer srv.Close()
	time1 := func(f func() error) (time.Duration, error) {
		t0 := time.Now()
		err := f()
		return time.Since(t0), err
	}
	var page tgclient.PendingPage
	var list inbox.List
	for range repeats {
		d, err := time1(func() error {
			_, err := e.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{PageSize: ListingCLIPage,
				Query: fmt.Sprintf("WorkflowType = 'AgentRun' AND ExecutionStatus = 'Running' AND TaskQueue IN ('%s') AND %s = '%s'",
					TaskQueue, workflows.SearchAttrStatus, workflows.StatusWaitingForApproval)})
			return err
		})
		if err != nil {
			return l, fmt.Errorf("listing: %w", err)
		}
		l.List = append(l.List, d)
		if d, err = time1(func() (err error) {
			page, err = tg.Pending(ctx, tgclient.PendingOptions{PageSize: ListingCLIPage})
			return err
		}); err != nil {
			return l, fmt.Errorf("client.Pending: %w", err)
		}
		l.Pending = append(l.Pending, d)
		l.PendingCalls, l.PendingRuns = len(page.Calls), page.Runs
		if d, err = time1(func() (err error) { list, err = inboxGet(ctx, srv.URL+"/api/pending"); return err }); err != nil {
			return l, err
		}
		l.Inbox = append(l.Inbox, d)
		l.InboxCalls, l.InboxRuns = len(list.Calls), inbox.DefaultPageSize
		if d, err = time1(func() error { _, err := inboxGet(ctx, srv.URL+"/api/pending?tool="+Write); return err }); err != nil {
			return l, err
		}
		l.Tool = append(l.Tool, d)
		if d, err = time1(func() error { _, err := tg.State(ctx, ids[len(ids)/2]); return err }); err != nil {
			return l, fmt.Errorf("one state query: %w", err)
		}
		l.OneRun = append(l.OneRun, d)
	}
	logf(log, "listing: first page: visibility %s, client.Pending %s (%d calls), inbox %s (%d calls), one state query %s (medians)",
		dur(Median(l.List)), dur(Median(l.Pending)), l.PendingCalls, dur(Median(l.Inbox)), l.InboxCalls, dur(Median(l.OneRun)))

	if err := measureCLI(ctx, e, &l, bin, log); err != nil {
		return l, err
	}

	for _, size := range []int{ListingCLIPage, 100, 200, 500, 1000} {
		d, err := visibilityAlone(ctx, e, size)
		l.Visibility = append(l.Visibility, VisibilityPage{Size: size, Took: d, Error: errText(err)})
		logf(log, "listing: visibility alone, the old query, a page of %d runs: %s %v", size, dur(d), err)
	}
	if baseline > 0 {
		if l.LegacyAll, err = legacyPending(ctx, e); err != nil {
			return l, fmt.Errorf("the old listing over every run: %w", err)
		}
		logf(log, "listing: the old listing, %d runs waiting: %s, %d queried, %d failed %q, listing error %q",
			n, dur(l.LegacyAll.Took), l.LegacyAll.Runs, l.LegacyAll.Failed, l.LegacyAll.Errors, l.LegacyAll.ListError)
	}
	return l, nil
}

// VisibilityPage is one visibility listing of the waiting runs, alone.
type VisibilityPage struct {
	Size  int
	Took  time.Duration
	Error string
}

// visibilityAlone times one ListWorkflowExecutions of the old query for a
// page of size runs, on the raw service client with a one-minute deadline
// (the SDK's client would cut the call at 10 s).
func visibilityAlone(ctx context.Context, e *Env, size int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	t0 := time.Now()
	_, err := e.Client.WorkflowService().ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: e.Server.Namespace(), Query: legacyQuery, PageSize: int32(size)})
	return time.Since(t0), err
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// startWaiting starts the runs numbered from to to-1, each proposing one
// write under the human policy, 16 starts at a time, and waits until
// visibility shows to runs of the bench's queue waiting for approval.
func startWaiting(ctx context.Context, e *Env, from, to int, log io.Writer) ([]string, error) {
	prefix := e.newID("listing")
	ids := make([]string, to-from)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ids) || ctx.Err() != nil {
					return
				}
				ids[i] = fmt.Sprintf("%s-%05d", prefix, from+i)
				in := Input(workflows.PolicyHuman, Calls(Write, from+i, 1))
				if _, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: ids[i], TaskQueue: TaskQueue}, workflows.WorkflowName, in); err != nil {
					errs <- fmt.Errorf("starting %s: %w", ids[i], err)
					return
				}
				if (from+i+1)%1000 == 0 {
					logf(log, "listing: %d runs started", from+i+1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return ids, err
	}
	query := fmt.Sprintf("TaskQueue = '%s' AND %s = '%s' AND ExecutionStatus = 'Running'", TaskQueue, workflows.SearchAttrStatus, workflows.StatusWaitingForApproval)
	for last := int64(-1); ; {
		resp, err := e.Client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
		if err != nil {
			return ids, fmt.Errorf("counting waiting runs: %w", err)
		}
		if resp.GetCount() >= int64(to) {
			return ids, nil
		}
		if resp.GetCount()/500 != last/500 {
			logf(log, "listing: %d of %d runs waiting", resp.GetCount(), to)
		}
		last = resp.GetCount()
		select {
		case <-ctx.Done():
			return ids, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// terminate ends the section's runs, 16 at a time.
func terminate(e *Env, ids []string, log io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(ids); i = int(next.Add(1)) - 1 {
				if ids[i] != "" {
					_ = e.Client.TerminateWorkflow(ctx, ids[i], "", "bench: listing measured")
				}
			}
		}()
	}
	wg.Wait()
	logf(log, "listing: %d runs terminated", len(ids))
}

// inboxGet is GET path of the inbox as its page asks.
func inboxGet(ctx context.Context, url string) (inbox.List, error) {
	var l inbox.List
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return l, err
	}
	req.Header.Set(inbox.Header, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return l, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return l, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return l, fmt.Errorf("GET %s: %w", url, err)
	}
	if len(l.Failed) > 0 {
		return l, fmt.Errorf("GET %s: runs failed: %+v", url, l.Failed)
	}
	return l, nil
}

// measureCLI times `toolgate pending --json`'s first page as an operator
// runs it (a process of its own), and the same on an empty queue.
func measureCLI(ctx context.Context, e *Env, l *Listing, bin string, log io.Writer) error {
	if bin == "" {
		dir, err := os.MkdirTemp("", "toolgate-bench-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if bin, err = buildToolgate(ctx, dir); err != nil {
			l.CLISkipped = err.Error()
			logf(log, "listing: toolgate pending not measured: %v", err)
			return nil
		}
	}
	run := func(queue string) (time.Duration, int, error) {
		cmd := exec.CommandContext(ctx, bin, "pending", "--json", "--address", e.Server.Address(), "--namespace", e.Server.Namespace(), "--task-queue", queue)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		t0 := time.Now()
		out, err := cmd.Output()
		d := time.Since(t0)
		if err != nil {
			return d, 0, fmt.Errorf("toolgate pending: %w: %s", err, stderr.Bytes())
		}
		var calls []json.RawMessage
		if err := json.Unmarshal(out, &calls); err != nil {
			return d, 0, fmt.Errorf("toolgate pending printed %q: %w", out, err)
		}
		return d, len(calls), nil
	}
	if _, _, err := run(TaskQueue); err != nil { // warm the binary's pages in the file cache, not counted
		return err
	}
	for range l.Repeats {
		d, calls, err := run(TaskQueue)
		if err != nil {
			return err
		}
		l.CLI, l.CLICalls = append(l.CLI, d), calls
		if d, _, err = run("toolgate-bench-empty"); err != nil {
			return err
		}
		l.CLIEmpty = append(l.CLIEmpty, d)
	}
	logf(log, "listing: toolgate pending, first page: %s (%d calls); on an empty queue: %s (medians)", dur(Median(l.CLI)), l.CLICalls, dur(Median(l.CLIEmpty)))
	return nil
}

// buildToolgate builds ./cmd/toolgate of this module into dir.
func buildToolgate(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("building toolgate: not inside the module (go env GOMOD: %q, %v)", gomod, err)
	}
	bin := filepath.Join(dir, "toolgate")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/toolgate")
	cmd.Dir = filepath.Dir(gomod)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/toolgate: %w\n%s", err, b)
	}
	return bin, nil
}

// legacyQuery is the query of the listing before issue #20.
var legacyQuery = fmt.Sprintf(`WorkflowType = %q AND ExecutionStatus = "Running" AND %s = %q`,
	workflows.WorkflowName, workflows.SearchAttrStatus, workflows.StatusWaitingForApproval)

// legacyPending is the listing before issue #20 (client.AllPending then):
// every waiting AgentRun listed through the SDK's client at the server's
// page size, then each one's state queried one after the other under the
// caller's context, a run whose query fails counted and skipped. A listing
// that fails (ListError) ends it, as it failed the old listing; the error
// is for the bench's own failures.
func legacyPending(ctx context.Context, e *Env) (res LegacyListing, err error) {
	t0 := time.Now()
	defer func() { res.Took = time.Since(t0) }()
	req := &workflowservice.ListWorkflowExecutionsRequest{Query: legacyQuery}
	tg := tgclient.New(e.Client)
	for {
		resp, err := e.Client.ListWorkflow(ctx, req)
		if err != nil {
			res.ListError = err.Error()
			return res, ctx.Err()
		}
		for _, ex := range resp.GetExecutions() {
			res.Runs++
			q0 := time.Now()
			if _, err := tg.State(ctx, ex.GetExecution().GetWorkflowId()); err != nil {
				res.Failed++
				if len(res.Errors) < 3 {
					res.Errors = append(res.Errors, fmt.Sprintf("%s after %v: %v", ex.GetExecution().GetWorkflowId(), time.Since(q0).Round(time.Millisecond), err))
				}
			}
		}
		if len(resp.GetNextPageToken()) == 0 {
			return res, nil
		}
		req.NextPageToken = resp.GetNextPageToken()
	}
}

// LegacyListing is one run of the old listing: the runs it queried, how
// many failed (and the first few errors), a failed listing, and how long it
// took.
type LegacyListing struct {
	Runs, Failed int
	Errors       []string
	ListError    string
	Took         time.Duration
}

func (r *Report) listingVerdicts() []Verdict {
	if !r.Config.Has(SectionListing) {
		return nil
	}
	l := r.Listing
	ran := l.Runs >= TargetListingRuns
	note := ""
	if !ran {
		note = fmt.Sprintf(" (only %d runs waiting: add --listing-runs %d)", l.Runs, TargetListingRuns)
	}
	inboxV := Verdict{Target: fmt.Sprintf("with %d runs waiting, the inbox's first page answers in < %v", TargetListingRuns, TargetListing)}
	inboxV.Ran = ran && len(l.Inbox) > 0
	inboxV.Met, inboxV.Factor = Median(l.Inbox) < TargetListing && maxDur(l.Inbox) < TargetListing, float64(maxDur(l.Inbox))/float64(TargetListing)
	inboxV.Figure = fmt.Sprintf("median %s, slowest %s of %d (%d runs, %d calls)%s", dur(Median(l.Inbox)), dur(maxDur(l.Inbox)), len(l.Inbox), l.InboxRuns, l.InboxCalls, note)
	cli := Verdict{Target: fmt.Sprintf("with %d runs waiting, `toolgate pending` (first page) answers in < %v", TargetListingRuns, TargetListing)}
	if l.CLISkipped != "" {
		cli.Figure = "not run: " + l.CLISkipped
	} else {
		cli.Ran = ran && len(l.CLI) > 0
		cli.Met, cli.Factor = maxDur(l.CLI) < TargetListing, float64(maxDur(l.CLI))/float64(TargetListing)
		cli.Figure = fmt.Sprintf("median %s, slowest %s of %d, the whole process (%d calls)%s", dur(Median(l.CLI)), dur(maxDur(l.CLI)), len(l.CLI), l.CLICalls, note)
	}
	return []Verdict{inboxV, cli}
}

func maxDur(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

func (r *Report) tableListing(p printer) {
	l := r.Listing
	p("9. Listing the waiting calls: %d AgentRuns each waiting for approval of one write (started in %v), on the bench's queue. First pages, each timed %d times on the client's clock: median / slowest. Every row queries only the runs of its page, concurrently (%d at a time), each under a %v deadline.",
		l.Runs, l.StartTook.Round(time.Second), l.Repeats, tgclient.ListParallelism, tgclient.DefaultQueryTimeout)
	p("")
	p("| first page | runs queried | calls | median | slowest |")
	p("|---|---:|---:|---:|---:|")
	row := func(name string, runs, calls string, ds []time.Duration) {
		if len(ds) == 0 {
			return
		}
		p("| %s | %s | %s | %s | %s |", name, runs, calls, ms2(Median(ds)), ms2(maxDur(ds)))
	}
	row(fmt.Sprintf("visibility only: ListWorkflow, %d runs", ListingCLIPage), "0", "—", l.List)
	row(fmt.Sprintf("client.Pending, %d runs", ListingCLIPage), fmt.Sprint(l.PendingRuns), fmt.Sprint(l.PendingCalls), l.Pending)
	row("inbox GET /api/pending (its default page; state and trace of each run)", fmt.Sprint(l.InboxRuns), fmt.Sprint(l.InboxCalls), l.Inbox)
	row("inbox GET /api/pending?tool=write (filtered by visibility)", fmt.Sprint(l.InboxRuns), fmt.Sprint(l.InboxCalls), l.Tool)
	row(fmt.Sprintf("`toolgate pending --json` (default page, %d runs), the whole process", ListingCLIPage), fmt.Sprint(ListingCLIPage), fmt.Sprint(l.CLICalls), l.CLI)
	row("`toolgate pending --json` on a queue with no run (the process's own cost)", "0", "0", l.CLIEmpty)
	if l.CLISkipped != "" {
		p("| `toolgate pending` | not run: %s | | | |", l.CLISkipped)
	}
	p("")
	p("Baselines, measured in the same run:")
	p("")
	p("| baseline | runs queried | time |")
	p("|---|---:|---:|")
	if len(l.OneRun) > 0 {
		p("| one run's state query (median / slowest) | 1 | %s / %s |", ms2(Median(l.OneRun)), ms2(maxDur(l.OneRun)))
	}
	outcome := func(r LegacyListing) string {
		out := dur(r.Took)
		if r.ListError != "" {
			out += fmt.Sprintf(", the listing failed after %d runs queried: %s", r.Runs, r.ListError)
		}
		if r.Failed > 0 {
			out += fmt.Sprintf(" (%d queries failed, e.g. %s)", r.Failed, strings.Join(r.Errors, "; "))
		}
		return out
	}
	if r := l.Legacy; r.Runs > 0 || r.ListError != "" {
		p("| the old listing (every waiting run listed, then queried one after the other), %d runs waiting | %d | %s |", r.Runs, r.Runs, outcome(r))
	}
	if r := l.LegacyAll; r.Runs > 0 || r.ListError != "" {
		p("| the old listing, %d runs waiting | %d | %s |", l.Runs, r.Runs, outcome(r))
	}
	for _, v := range l.Visibility {
		res := dur(v.Took)
		if v.Error != "" {
			res += ": " + v.Error
		}
		p("| visibility alone, the old query, a page of %d runs (raw service call, 1-minute deadline) | 0 | %s |", v.Size, res)
	}
	p("")
	verdicts(p, r.listingVerdicts())
	p("")
}
