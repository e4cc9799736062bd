package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"google.golang.org/protobuf/proto"

	"github.com/toolgate/toolgate/replay"
	"github.com/toolgate/toolgate/workflows"
)

// ---------------------------------------------------------------------------
// 1. Calls per second: AgentRun (always_approve, all misses) vs Bare.

// Throughput is the side-by-side calls-per-second comparison.
type Throughput struct {
	Calls    int // calls per run (sequential, one per planner step)
	Parallel int // runs in flight at once on each side (in all, when Mixed)
	// Mixed: both sides run at the same time, half of the runs each (see MixedRound).
	Mixed bool
	// Agent and Bare are calls per second per round; Ratio is Agent/Bare of
	// the same round.
	Agent, Bare, Ratio []float64
	// AgentTask and BareTask are the workflow-task time per call per round:
	// the time between WorkflowTaskStarted and WorkflowTaskCompleted, summed
	// over the runs' histories and divided by the calls. It is where the
	// check, gate, memo and trace run, without the server's round trips.
	AgentTask, BareTask []time.Duration
}

// Round is one round of the comparison.
type Round struct {
	Agent, Bare         float64 // calls per second
	AgentTask, BareTask time.Duration
}

// MeasureThroughput warms both sides up, then runs `rounds` rounds of
// ThroughputRound.
func MeasureThroughput(ctx context.Context, e *Env, calls, rounds, parallel int, mixed bool, log io.Writer) (Throughput, error) {
	t := Throughput{Calls: calls, Parallel: parallel, Mixed: mixed}
	round := func(calls int, agentFirst bool) (Round, error) {
		if mixed {
			return MixedRound(ctx, e, calls, parallel)
		}
		return ThroughputRound(ctx, e, calls, parallel, agentFirst)
	}
	if _, err := round(min(calls, 10), true); err != nil { // warm-up, not counted
		return t, err
	}
	for r := 0; r < rounds; r++ {
		rd, err := round(calls, r%2 == 0)
		if err != nil {
			return t, err
		}
		t.Add(rd)
		logf(log, "throughput round %d/%d: toolgate %.1f calls/s, bare %.1f calls/s, ratio %.3f; workflow-task time per call %v vs %v",
			r+1, rounds, rd.Agent, rd.Bare, rd.Agent/rd.Bare, rd.AgentTask, rd.BareTask)
	}
	return t, nil
}

// Add appends one round.
func (t *Throughput) Add(rd Round) {
	t.Agent, t.Bare, t.Ratio = append(t.Agent, rd.Agent), append(t.Bare, rd.Bare), append(t.Ratio, rd.Agent/rd.Bare)
	t.AgentTask, t.BareTask = append(t.AgentTask, rd.AgentTask), append(t.BareTask, rd.BareTask)
}

// ThroughputRound runs `parallel` AgentRuns of `calls` echo calls with
// distinct arguments (every call a memo miss: check, gate, memo lookup,
// activity, memo store, trace; policy always_approve) and `parallel` Bare runs
// of the same calls, one side after the other (AgentRun first when
// agentFirst; alternate it between rounds so drift falls on both sides
// alike). Calls per second are calls / the time from the first start to the last
// close (server event times).
func ThroughputRound(ctx context.Context, e *Env, calls, parallel int, agentFirst bool) (Round, error) {
	cs := Calls(Echo, 1, calls)
	agent := func() ([]RunRef, time.Duration, error) {
		return timeParallel(parallel, func() (RunRef, error) {
			r, _, err := e.Agent(ctx, Input(workflows.PolicyAlwaysApprove, cs))
			return r, err
		})
	}
	bare := func() ([]RunRef, time.Duration, error) {
		return timeParallel(parallel, func() (RunRef, error) { return e.Bare(ctx, cs) })
	}
	var rd Round
	var ra, rb []RunRef
	var da, db time.Duration
	var err error
	if agentFirst {
		if ra, da, err = agent(); err == nil {
			rb, db, err = bare()
		}
	} else {
		if rb, db, err = bare(); err == nil {
			ra, da, err = agent()
		}
	}
	if err != nil {
		return rd, err
	}
	n := calls * parallel
	rd.Agent, rd.Bare = float64(n)/da.Seconds(), float64(n)/db.Seconds()
	err = e.taskTimePerCall(ctx, &rd, ra, rb, n)
	return rd, err
}

// MixedRound runs parallel/2 AgentRuns and parallel/2 Bare runs of the same
// calls at the same time, interleaved, so that both sides see exactly the
// same load and the same server state (under saturation, the embedded
// server's throughput drifts as its database grows, which a side-after-side
// round cannot cancel). A side's calls per second are its runs' calls over
// the median run time of the side.
func MixedRound(ctx context.Context, e *Env, calls, parallel int) (Round, error) {
	cs := Calls(Echo, 1, calls)
	half := max(parallel/2, 1)
	ra := make([]RunRef, half)
	rb := make([]RunRef, half)
	errs := make([]error, 2*half)
	var wg sync.WaitGroup
	for i := range 2 * half {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				ra[i/2], _, errs[i] = e.Agent(ctx, Input(workflows.PolicyAlwaysApprove, cs))
			} else {
				rb[i/2], errs[i] = e.Bare(ctx, cs)
			}
		}()
	}
	wg.Wait()
	var rd Round
	for _, err := range errs {
		if err != nil {
			return rd, err
		}
	}
	median := func(runs []RunRef) time.Duration {
		var ds []time.Duration
		for _, r := range runs {
			ds = append(ds, r.Elapsed)
		}
		return Median(ds)
	}
	n := calls * half
	rd.Agent, rd.Bare = float64(n)/median(ra).Seconds(), float64(n)/median(rb).Seconds()
	err := e.taskTimePerCall(ctx, &rd, ra, rb, n)
	return rd, err
}

// taskTimePerCall sets rd's workflow-task time per call of each side, over
// the n calls each side made.
func (e *Env) taskTimePerCall(ctx context.Context, rd *Round, ra, rb []RunRef, n int) error {
	var err error
	if rd.AgentTask, err = e.taskTime(ctx, ra); err != nil {
		return err
	}
	if rd.BareTask, err = e.taskTime(ctx, rb); err != nil {
		return err
	}
	rd.AgentTask /= time.Duration(n)
	rd.BareTask /= time.Duration(n)
	return nil
}

// taskTime sums the workflow-task time of the runs.
func (e *Env) taskTime(ctx context.Context, runs []RunRef) (time.Duration, error) {
	var sum time.Duration
	for _, r := range runs {
		h, err := e.History(ctx, r.ID, r.RunID)
		if err != nil {
			return 0, err
		}
		sum += TaskTime(h)
	}
	return sum, nil
}

// TaskTime sums, over a history's workflow tasks, the time from
// WorkflowTaskStarted to the task's completion (server timestamps): the time
// the worker spent on the workflow code, local activities included, plus the
// two local hops of handing the task over and back.
func TaskTime(h *historypb.History) time.Duration {
	var sum time.Duration
	var started time.Time
	for _, ev := range h.Events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			started = ev.GetEventTime().AsTime()
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			if !started.IsZero() {
				sum += ev.GetEventTime().AsTime().Sub(started)
				started = time.Time{}
			}
		}
	}
	return sum
}

// timeParallel runs f n times at once and returns the runs and the time from
// the first start to the last close (server times).
func timeParallel(n int, f func() (RunRef, error)) ([]RunRef, time.Duration, error) {
	runs := make([]RunRef, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); runs[i], errs[i] = f() }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, 0, err
		}
	}
	start, end := runs[0].Start, runs[0].End
	for _, r := range runs {
		if r.Start.Before(start) {
			start = r.Start
		}
		if r.End.After(end) {
			end = r.End
		}
	}
	return runs, end.Sub(start), nil
}

// ---------------------------------------------------------------------------
// 2. History events added per call.

// EventKind is one kind of call whose cost in history events is measured.
type EventKind struct {
	Name string
	// Bare: the call is made by Bare; otherwise by AgentRun under Policy.
	Bare   bool
	Tool   string
	Policy string
	// Repeat: every call has the same arguments (the second and later are memo hits).
	Repeat bool
	// Approve: how a human approves each blocked call ("signal" or "update").
	Approve string
}

// EventKinds are the kinds measured, toolgate's first, then bare Temporal's.
var EventKinds = []EventKind{
	{Name: "memo hit", Tool: Echo, Policy: workflows.PolicyAlwaysApprove, Repeat: true},
	{Name: "miss, regular activity", Tool: Echo, Policy: workflows.PolicyAlwaysApprove},
	{Name: "miss, local activity", Tool: EchoLocal, Policy: workflows.PolicyAlwaysApprove},
	{Name: "destructive, approved (always_approve)", Tool: Write, Policy: workflows.PolicyAlwaysApprove},
	{Name: "destructive, blocked then approved (signal)", Tool: Write, Policy: workflows.PolicyHuman, Approve: "signal"},
	{Name: "destructive, blocked then approved (update)", Tool: Write, Policy: workflows.PolicyHuman, Approve: "update"},
	{Name: "bare Temporal: activity", Bare: true, Tool: Echo},
	{Name: "bare Temporal: local activity", Bare: true, Tool: EchoLocal},
}

// EventRow is the measured cost of one kind: the histories of runs making 1,
// 2 and 3 such calls, and the differences.
type EventRow struct {
	Kind EventKind
	// Events and Scheduled (ActivityTaskScheduled events) of the runs with 1, 2 and 3 calls.
	Events, Scheduled [3]int
	// Delta is Events[k+1]-Events[k]: what the 2nd and the 3rd call added.
	Delta [2]int
	// ByType breaks the 3rd call's delta down by event type.
	ByType map[string]int
}

// PerCall is the events one more call adds (the 3rd call's delta).
func (r EventRow) PerCall() int { return r.Delta[1] }

// MeasureEvents runs every kind with 1, 2 and 3 calls and reads the real histories.
func MeasureEvents(ctx context.Context, e *Env, kinds []EventKind, log io.Writer) ([]EventRow, error) {
	var rows []EventRow
	for _, k := range kinds {
		row := EventRow{Kind: k}
		var hs [3]*historypb.History
		for i := range 3 {
			h, err := runKind(ctx, e, k, i+1)
			if err != nil {
				return nil, fmt.Errorf("%s, %d calls: %w", k.Name, i+1, err)
			}
			hs[i] = h
			row.Events[i] = len(h.Events)
			row.Scheduled[i] = CountType(h, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
		}
		row.Delta = [2]int{row.Events[1] - row.Events[0], row.Events[2] - row.Events[1]}
		row.ByType = DeltaByType(hs[1], hs[2])
		logf(log, "events: %-45s %v events, +%d +%d per call %v", k.Name, row.Events, row.Delta[0], row.Delta[1], row.ByType)
		rows = append(rows, row)
	}
	return rows, nil
}

// runKind makes n calls of kind k in one run and returns its history.
func runKind(ctx context.Context, e *Env, k EventKind, n int) (*historypb.History, error) {
	cs := Calls(k.Tool, 1, n)
	if k.Repeat {
		cs = Repeat(k.Tool, 1, n)
	}
	var r RunRef
	var err error
	switch {
	case k.Bare:
		r, err = e.Bare(ctx, cs)
	case k.Approve != "":
		r, _, err = e.agent(ctx, Input(k.Policy, cs), e.approveEach(k.Approve == "update"))
	default:
		r, _, err = e.Agent(ctx, Input(k.Policy, cs))
	}
	if err != nil {
		return nil, err
	}
	return e.History(ctx, r.ID, r.RunID)
}

// CountType counts the events of one type in h.
func CountType(h *historypb.History, t enumspb.EventType) int {
	n := 0
	for _, ev := range h.Events {
		if ev.GetEventType() == t {
			n++
		}
	}
	return n
}

// DeltaByType is, per event type, how many more events b has than a (types
// with no difference left out). Type names drop the EVENT_TYPE_ prefix.
func DeltaByType(a, b *historypb.History) map[string]int {
	d := map[string]int{}
	for _, ev := range b.Events {
		d[shortType(ev.GetEventType())]++
	}
	for _, ev := range a.Events {
		d[shortType(ev.GetEventType())]--
	}
	for k, v := range d {
		if v == 0 {
			delete(d, k)
		}
	}
	return d
}

func shortType(t enumspb.EventType) string {
	return strings.TrimPrefix(t.String(), "EVENT_TYPE_")
}

// ---------------------------------------------------------------------------
// 3. A repeated read: served from the memo vs run again.

// MemoLatency is the per-call latency of a repeated read answered by the
// memo, against running the read again.
type MemoLatency struct {
	Hits, Reruns int
	// Per call, per round.
	Hit, Rerun, RerunLocal []time.Duration
	// HitReplay is the hit measured by replaying the base and the hits runs
	// (median of 5 replays each): the workflow code's own CPU time for a hit,
	// without the server and its noise.
	HitReplay []time.Duration
}

// memoRuns are the five runs of a memo round: base, hits, reruns, base local, reruns local.
func memoRuns(hits, reruns int) []workflows.RunInput {
	return []workflows.RunInput{
		Input(workflows.PolicyAlwaysApprove, Calls(Echo, 1, 1)),
		Input(workflows.PolicyAlwaysApprove, Repeat(Echo, 1, 1+hits)),
		Input(workflows.PolicyAlwaysApprove, Calls(Echo, 1, 1+reruns)),
		Input(workflows.PolicyAlwaysApprove, Calls(EchoLocal, 1, 1)),
		Input(workflows.PolicyAlwaysApprove, Calls(EchoLocal, 1, 1+reruns)),
	}
}

// MeasureMemoLatency warms up, then runs `rounds` rounds of MemoRound.
func MeasureMemoLatency(ctx context.Context, e *Env, hits, reruns, rounds int, log io.Writer) (MemoLatency, error) {
	m := MemoLatency{Hits: hits, Reruns: reruns}
	for _, in := range memoRuns(min(hits, 10), min(reruns, 2)) { // warm-up
		if _, _, err := e.Agent(ctx, in); err != nil {
			return m, err
		}
	}
	for r := 0; r < rounds; r++ {
		if err := m.Round(ctx, e, r%2 == 1); err != nil {
			return m, err
		}
		logf(log, "memo round %d/%d: hit %v/call (in replay %v), rerun %v/call, rerun (local) %v/call",
			r+1, rounds, m.Hit[r], m.HitReplay[r], m.Rerun[r], m.RerunLocal[r])
	}
	return m, nil
}

// Round times five AgentRuns:
//
//	base          echo{n:1}
//	hits          echo{n:1} + Hits × echo{n:1}          (every repeat a memo hit)
//	reruns        echo{n:1} + Reruns × echo{n:2…}       (every call a miss: run again)
//	base local    echo_local{n:1}
//	reruns local  echo_local{n:1} + Reruns × echo_local{n:2…}
//
// and appends, per call: hit = (hits-base)/Hits and rerun local =
// (reruns local-base local)/Reruns in workflow-task time (both happen inside
// workflow tasks: a hit never leaves the workflow, a local activity runs
// within the task), and rerun = (reruns-base)/Reruns in run time (start to close: a
// regular activity is a round trip through the server). A miss is exactly
// what a repeated read costs without the memo: check, gate, lookup, activity,
// store, trace. The hit is also measured in replay (HitReplay). reverse
// runs the five in the opposite order.
func (m *MemoLatency) Round(ctx context.Context, e *Env, reverse bool) error {
	inputs := memoRuns(m.Hits, m.Reruns)
	var wall, task, replayed [5]time.Duration
	order := []int{0, 1, 2, 3, 4}
	if reverse {
		slices.Reverse(order)
	}
	for _, i := range order {
		run, _, err := e.Agent(ctx, inputs[i])
		if err != nil {
			return err
		}
		h, err := e.History(ctx, run.ID, run.RunID)
		if err != nil {
			return err
		}
		wall[i], task[i] = run.Elapsed, TaskTime(h)
		if i <= 1 {
			var ds []time.Duration
			for range 5 {
				d, err := e.Replay(run.ID, RunHistory{RunID: run.RunID, History: h})
				if err != nil {
					return err
				}
				ds = append(ds, d)
			}
			replayed[i] = Median(ds)
		}
	}
	m.Hit = append(m.Hit, (task[1]-task[0])/time.Duration(m.Hits))
	m.HitReplay = append(m.HitReplay, (replayed[1]-replayed[0])/time.Duration(m.Hits))
	m.Rerun = append(m.Rerun, (wall[2]-wall[0])/time.Duration(m.Reruns))
	m.RerunLocal = append(m.RerunLocal, (task[4]-task[3])/time.Duration(m.Reruns))
	return nil
}

// ---------------------------------------------------------------------------
// 4. Long sessions with continue-as-new: history length and replay time.

// Session is a long run to measure: Calls sequential calls with distinct
// arguments (all misses), of echo — or of echo_local when Local.
type Session struct {
	Calls int
	Local bool
}

func (s Session) String() string {
	if s.Local {
		return fmt.Sprintf("%d:local", s.Calls)
	}
	return fmt.Sprint(s.Calls)
}

// Tool is the session's tool.
func (s Session) Tool() string {
	if s.Local {
		return EchoLocal
	}
	return Echo
}

// SessionResult is what one session measured.
type SessionResult struct {
	Session
	HistoryLimit int
	Elapsed      time.Duration
	// Per run of the continue-as-new chain: events, history bytes (protobuf
	// size), and replay time (median of Replays replays).
	Events  []int
	Tasks   []int // workflow tasks per run
	Bytes   []int
	Replay  []time.Duration
	Replays int
	// FileReplay is the replay of the longest run exported as JSON (what
	// `toolgate replay FILE` and replay.File do: read, decode,
	// replay); FileBytes is that file's size.
	FileReplay time.Duration
	FileBytes  int
}

// Runs is the number of runs in the chain.
func (s SessionResult) Runs() int { return len(s.Events) }

// MaxEvents is the longest run's event count.
func (s SessionResult) MaxEvents() int { return slices.Max(s.Events) }

// MaxBytes is the largest run's history size.
func (s SessionResult) MaxBytes() int { return slices.Max(s.Bytes) }

// MaxReplay is the slowest run's replay time.
func (s SessionResult) MaxReplay() time.Duration { return slices.Max(s.Replay) }

// TotalEvents sums the events of every run.
func (s SessionResult) TotalEvents() int {
	n := 0
	for _, v := range s.Events {
		n += v
	}
	return n
}

// CallsPerSecond is the session's calls over its wall time.
func (s SessionResult) CallsPerSecond() float64 { return float64(s.Calls) / s.Elapsed.Seconds() }

// MeasureSession runs one session with history_limit limit, then fetches the
// history of every run of its continue-as-new chain and replays each one
// `replays` times against this build's workflow code (an error if any is
// non-deterministic).
func MeasureSession(ctx context.Context, e *Env, s Session, limit, replays int, log io.Writer) (SessionResult, error) {
	res := SessionResult{Session: s, HistoryLimit: limit, Replays: replays}
	in := Input(workflows.PolicyAlwaysApprove, Calls(s.Tool(), 1, s.Calls))
	in.HistoryLimit = limit
	logf(log, "session %s: running %d calls (history_limit %d)…", s, s.Calls, limit)
	run, out, err := e.Agent(ctx, in)
	if err != nil {
		return res, err
	}
	res.Elapsed = run.Elapsed
	if len(out.Trace) == 0 || out.Trace[len(out.Trace)-1].CallID != fmt.Sprintf("c-%d", s.Calls) {
		return res, fmt.Errorf("session %s: the last trace record is not call c-%d", s, s.Calls)
	}
	chain, err := e.Chain(ctx, run.ID, run.RunID)
	if err != nil {
		return res, err
	}
	for _, rh := range chain {
		var ds []time.Duration
		for range replays {
			d, err := e.Replay(run.ID, rh)
			if err != nil {
				return res, fmt.Errorf("replaying run %s of %s: %w", rh.RunID, run.ID, err)
			}
			ds = append(ds, d)
		}
		res.Events = append(res.Events, len(rh.History.Events))
		res.Tasks = append(res.Tasks, CountType(rh.History, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED))
		res.Bytes = append(res.Bytes, proto.Size(rh.History))
		res.Replay = append(res.Replay, Median(ds))
	}
	longest := slices.Index(res.Events, res.MaxEvents())
	if res.FileReplay, res.FileBytes, err = replayFile(chain[longest], replays); err != nil {
		return res, err
	}
	logf(log, "session %s: %v, %d runs, events per run %v, replay %v", s, run.Elapsed.Round(time.Millisecond), res.Runs(), res.Events, res.Replay)
	return res, nil
}

// replayFile exports a run's history as JSON to a temporary file and times
// replay.File on it (median of n).
func replayFile(rh RunHistory, n int) (time.Duration, int, error) {
	b, err := temporalproto.CustomJSONMarshalOptions{}.Marshal(rh.History)
	if err != nil {
		return 0, 0, err
	}
	f, err := os.CreateTemp("", "toolgate-bench-history-*.json")
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return 0, 0, err
	}
	if err := f.Close(); err != nil {
		return 0, 0, err
	}
	var ds []time.Duration
	for range n {
		start := time.Now()
		if err := replay.File(f.Name()); err != nil {
			return 0, 0, err
		}
		ds = append(ds, time.Since(start))
	}
	return Median(ds), len(b), nil
}

// ---------------------------------------------------------------------------
// Helpers.

// Median is the median of xs (the mean of the middle two for an even count).
func Median[T ~int64 | ~float64 | ~int](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}
