package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// ---------------------------------------------------------------------------
// What a fleet guard costs a call (rules version 10): a destructive call a
// guard covers is reserved with the fleet ledger before it runs (the
// toolgate.ledger.reserve activity, an UpdateWithStart of the ledger
// workflow) and committed once it has (toolgate.ledger.settle; from rules
// version 12 at once, by local activity, both in the authority namespace,
// where the guard queues' workers run the ledger). Two workers
// on two task queues of the shared server run AgentRun under two policies
// that differ only by a budget guard over write:
//
//	baseline  write allowed by rule; no guards, no operators: no run consults the ledger
//	guarded   the same, plus a budget over write (amount args.n): every write reserves and commits
//
// Each round runs, one after the other and in alternating order, a run of
// sequential writes and a run of sequential reads (echo: covered by no
// guard) on each queue. A call's latency is read from server times: the gap
// between the ActivityTaskScheduled events of the tool's consecutive calls
// (what the call, and everything the run does between it and the next one,
// cost; for a guarded write, the next write's reservation, which carries
// this one's commit).

// GuardBudget is the guard of the guarded policy.
const GuardBudget = "write-budget"

// guardsPolicy is the policy of both queues; %s is the approver's key. The
// guarded one adds guardsText.
const guardsPolicy = `
approvers:
  bench: {key: "%s", roles: [ops]}
tools:
  write:
    rules:
      - {id: allow-writes, when: "true", decide: allow}
`

const guardsText = `guards:
  - {id: ` + GuardBudget + `, kind: budget, tools: [write], amount: args.n, limit: 1000000000000000, window: 1h}
`

// GuardQueues are the two task queues and their workers.
type GuardQueues struct {
	Baseline, Guarded string
	workers           []sdkworker.Worker
}

// StartGuardQueues starts a worker on a new baseline queue and one on a new
// guarded queue (their ledger is new too). Call Stop when done.
func StartGuardQueues(e *Env) (*GuardQueues, error) { return StartGuardQueuesWith(e, 1) }

// StartGuardQueuesWith is StartGuardQueues with workers workers on each
// queue: each holds leases of its own, as a worker process does.
func StartGuardQueuesWith(e *Env, workers int) (*GuardQueues, error) {
	pub, _, err := signed.GenerateKey()
	if err != nil {
		return nil, err
	}
	text := fmt.Sprintf(guardsPolicy, signed.FormatPublicKey(pub))
	q := &GuardQueues{Baseline: e.newID("guards-baseline"), Guarded: e.newID("guards-guarded")}
	for _, s := range []struct{ queue, text string }{{q.Baseline, text}, {q.Guarded, text + guardsText}} {
		p, err := policy.Parse([]byte(s.text))
		if err != nil {
			q.Stop()
			return nil, err
		}
		// As toolgate's workers run: the fleet ledger and every claim in the
		// authority namespace, over the same connection.
		o := worker.Options{Tools: Tools(), SearchAttributes: true, Policy: p, Authority: e.Authority}
		for range max(workers, 1) {
			w, err := worker.Start(e.Client, s.queue, o)
			if err != nil {
				q.Stop()
				return nil, fmt.Errorf("starting a worker of %s: %w", s.queue, err)
			}
			q.workers = append(q.workers, w)
		}
	}
	return q, nil
}

// Stop stops the queues' workers.
func (q *GuardQueues) Stop() {
	for _, w := range q.workers {
		w.Stop()
	}
	q.workers = nil
}

// GuardCost is the guard's cost, measured: every call's latency, by series.
type GuardCost struct {
	Calls, Rounds int // calls per run; rounds measured
	// Per-call latencies, every round's: writes and reads on each queue.
	BaselineWrite, GuardedWrite, BaselineRead, GuardedRead []time.Duration
	// LedgerActivities are the ledger activities each series' runs ran
	// (reserve, and from rules version 12 the commit, each a local
	// activity), summed over the rounds.
	LedgerActivities map[string]int
	// Hops are where a guarded write's time goes, by activity type (the
	// ledger's are local: within the write's hop): each activity's
	// ActivityTaskScheduled to the run's next one (the activity, and the
	// workflow task that took its result and scheduled the next).
	Hops map[string][]time.Duration
}

// Series names, as GuardCost.Series lists them.
const (
	SeriesBaselineWrite = "write, baseline"
	SeriesGuardedWrite  = "write, guarded"
	SeriesBaselineRead  = "read, baseline"
	SeriesGuardedRead   = "read, guarded"
)

// Series are the four series by name.
func (g *GuardCost) Series() map[string]*[]time.Duration {
	return map[string]*[]time.Duration{
		SeriesBaselineWrite: &g.BaselineWrite, SeriesGuardedWrite: &g.GuardedWrite,
		SeriesBaselineRead: &g.BaselineRead, SeriesGuardedRead: &g.GuardedRead,
	}
}

// Added is what the guard adds at percentile p: guarded − baseline, for
// writes and for reads.
func (g *GuardCost) Added(p float64) (write, read time.Duration) {
	return Percentile(g.GuardedWrite, p) - Percentile(g.BaselineWrite, p), Percentile(g.GuardedRead, p) - Percentile(g.BaselineRead, p)
}

// MeasureGuards warms up (one round of 5 calls a run, not counted), then
// measures rounds rounds of runs of calls calls each.
func MeasureGuards(ctx context.Context, e *Env, q *GuardQueues, calls, rounds int, log io.Writer) (GuardCost, error) {
	g := GuardCost{Calls: calls, LedgerActivities: map[string]int{}}
	if calls < 2 {
		return g, errors.New("a run needs 2 calls at least: a call's latency is the gap to the next one")
	}
	if err := WarmUpGuards(ctx, e, q); err != nil {
		return g, err
	}
	for i := range rounds {
		if err := g.Round(ctx, e, q, calls, (i+1)*calls*10, false); err != nil {
			return g, fmt.Errorf("round %d: %w", i+1, err)
		}
		logf(log, "guards: round %d/%d: write p50 %s baseline, %s guarded; read p50 %s baseline, %s guarded", i+1, rounds,
			dur(Percentile(g.BaselineWrite, 50)), dur(Percentile(g.GuardedWrite, 50)),
			dur(Percentile(g.BaselineRead, 50)), dur(Percentile(g.GuardedRead, 50)))
	}
	return g, nil
}

// WarmUpGuards runs one round of 5 calls a run, not counted: it starts the
// guarded queue's ledger.
func WarmUpGuards(ctx context.Context, e *Env, q *GuardQueues) error {
	warm := GuardCost{LedgerActivities: map[string]int{}}
	if err := warm.Round(ctx, e, q, 5, 0, true); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

// Round runs the four runs of one round (the guarded queue first when
// guardedFirst, else the baseline's) and adds their calls. Arguments start
// at first+1, so no read is a memo hit and no two rounds' calls share a key.
func (g *GuardCost) Round(ctx context.Context, e *Env, q *GuardQueues, calls, first int, guardedFirst bool) error {
	type run struct {
		series, queue, tool string
	}
	runs := []run{{SeriesBaselineWrite, q.Baseline, Write}, {SeriesGuardedWrite, q.Guarded, Write},
		{SeriesBaselineRead, q.Baseline, Echo}, {SeriesGuardedRead, q.Guarded, Echo}}
	if guardedFirst {
		runs[0], runs[1], runs[2], runs[3] = runs[1], runs[0], runs[3], runs[2]
	}
	series := g.Series()
	for _, r := range runs {
		ref, err := e.agentOn(ctx, r.queue, Input("", Calls(r.tool, first+1, calls)))
		if err != nil {
			return fmt.Errorf("%s: %w", r.series, err)
		}
		h, err := e.History(ctx, ref.ID, ref.RunID)
		if err != nil {
			return err
		}
		gaps := ToolGaps(h, r.tool)
		if len(gaps) != calls-1 {
			return fmt.Errorf("%s: run %s: %d gaps between %d calls", r.series, ref.ID, len(gaps), calls)
		}
		*series[r.series] = append(*series[r.series], gaps...)
		g.LedgerActivities[r.series] += countActivities(h, ledger.ReserveActivity) + countActivities(h, ledger.SettleActivity)
		if r.series == SeriesGuardedWrite {
			if g.Hops == nil {
				g.Hops = map[string][]time.Duration{}
			}
			for typ, hops := range ActivityHops(h) {
				g.Hops[typ] = append(g.Hops[typ], hops...)
			}
		}
	}
	g.Rounds++
	return nil
}

// ToolGaps are the gaps between the ActivityTaskScheduled events of
// consecutive calls of tool in h (server times): n calls, n-1 gaps.
func ToolGaps(h *historypb.History, tool string) []time.Duration {
	var out []time.Duration
	var last time.Time
	for _, ev := range h.GetEvents() {
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil || a.GetActivityType().GetName() != tool {
			continue
		}
		at := ev.GetEventTime().AsTime()
		if !last.IsZero() {
			out = append(out, at.Sub(last))
		}
		last = at
	}
	return out
}

// ActivityHops are, by activity type, the gaps from each activity's
// ActivityTaskScheduled to the next ActivityTaskScheduled of h (the last
// activity has none).
func ActivityHops(h *historypb.History) map[string][]time.Duration {
	out := map[string][]time.Duration{}
	var last time.Time
	var typ string
	for _, ev := range h.GetEvents() {
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil {
			continue
		}
		at := ev.GetEventTime().AsTime()
		if typ != "" {
			out[typ] = append(out[typ], at.Sub(last))
		}
		last, typ = at, a.GetActivityType().GetName()
	}
	return out
}

// countActivities is how many activities of type name h runs: scheduled,
// or local (their markers: a run's ledger activities are local).
func countActivities(h *historypb.History, name string) int {
	n := 0
	for _, ev := range h.GetEvents() {
		if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == name {
			n++
		}
		if m := ev.GetMarkerRecordedEventAttributes(); m.GetMarkerName() == "LocalActivity" {
			var data struct{ ActivityType string }
			if p := m.GetDetails()["data"].GetPayloads(); len(p) > 0 && json.Unmarshal(p[0].GetData(), &data) == nil && data.ActivityType == name {
				n++
			}
		}
	}
	return n
}

// agentOn runs AgentRun on queue to its end and returns it.
func (e *Env) agentOn(ctx context.Context, queue string, in workflows.RunInput) (RunRef, error) {
	r := RunRef{ID: e.newID("guards")}
	wr, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: r.ID, TaskQueue: queue}, workflows.WorkflowName, in)
	if err != nil {
		return r, err
	}
	r.RunID = wr.GetRunID()
	var res workflows.RunResult
	if err := wr.Get(ctx, &res); err != nil {
		return r, fmt.Errorf("run %s: %w", r.ID, err)
	}
	if res.Status != workflows.StatusCompleted {
		return r, fmt.Errorf("run %s ended %s: %s", r.ID, res.Status, res.Error)
	}
	for _, t := range res.Trace {
		if t.Status != workflows.TraceOK && t.Status != workflows.TraceApproved && t.Status != workflows.TraceReserved {
			return r, fmt.Errorf("run %s: call %s is %s: %s", r.ID, t.CallID, t.Status, t.Error+t.Reason)
		}
	}
	return r, nil
}

// GuardsTable writes the figures as a markdown table.
func (g *GuardCost) GuardsTable(w io.Writer) {
	fmt.Fprintf(w, "| call | baseline p50 | guarded p50 | added p50 | baseline p99 | guarded p99 | added p99 | ledger activities per call (local) |\n")
	fmt.Fprintf(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	rows := []struct {
		name      string
		base, grd []time.Duration
		series    string
	}{{"destructive (write)", g.BaselineWrite, g.GuardedWrite, SeriesGuardedWrite}, {"read (echo)", g.BaselineRead, g.GuardedRead, SeriesGuardedRead}}
	runs := g.Rounds * g.Calls
	for _, r := range rows {
		b50, g50, b99, g99 := Percentile(r.base, 50), Percentile(r.grd, 50), Percentile(r.base, 99), Percentile(r.grd, 99)
		per := 0.0
		if runs > 0 {
			per = float64(g.LedgerActivities[r.series]) / float64(runs)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %.0f |\n", r.name, dur(b50), dur(g50), dur(g50-b50), dur(b99), dur(g99), dur(g99-b99), per)
	}
	fmt.Fprintf(w, "\n%d rounds, %d calls a run, %d latencies per series (the gap between a call's activity and the next call's).\n",
		g.Rounds, g.Calls, len(g.GuardedWrite))
	if len(g.Hops) == 0 {
		return
	}
	fmt.Fprintf(w, "\nWhere a guarded write's time goes (each activity's ActivityTaskScheduled to the run's next):\n\n")
	fmt.Fprintf(w, "| activity | p50 | p99 | count |\n| --- | ---: | ---: | ---: |\n")
	for _, typ := range []string{Write} { // the ledger's are local activities: within the write's hop
		hops := g.Hops[typ]
		fmt.Fprintf(w, "| %s | %s | %s | %d |\n", typ, dur(Percentile(hops, 50)), dur(Percentile(hops, 99)), len(hops))
	}
}
