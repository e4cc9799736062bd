package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// The tests assert what does not depend on timing: exact event counts of real
// histories, continue-as-new and replay. Timing figures are only reported, by
// the benchmarks below and by cmd/toolgate-bench.

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// A repeated read is answered from the memo inside the workflow task: the run
// with the repeat has exactly the events of the run without it, and schedules
// no activity for it.
func TestMemoHitAddsNoEvents(t *testing.T) {
	e, ctx := sharedEnv(t), testCtx(t)
	once, _, err := e.Agent(ctx, Input(workflows.PolicyAlwaysApprove, Repeat(Echo, 7, 1)))
	require.NoError(t, err)
	twice, res, err := e.Agent(ctx, Input(workflows.PolicyAlwaysApprove, Repeat(Echo, 7, 2)))
	require.NoError(t, err)
	h1, err := e.History(ctx, once.ID, once.RunID)
	require.NoError(t, err)
	h2, err := e.History(ctx, twice.ID, twice.RunID)
	require.NoError(t, err)

	require.Len(t, h2.Events, len(h1.Events), "a memo hit must add no history event")
	require.Empty(t, DeltaByType(h1, h2))
	require.Equal(t, 1, CountType(h2, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), "one activity for the miss, none for the hit")
	require.Len(t, res.Trace, 2)
	require.Equal(t, workflows.TraceOK, res.Trace[0].Status)
	require.Equal(t, workflows.TraceCacheHit, res.Trace[1].Status)
	require.JSONEq(t, string(res.Trace[0].Result), string(res.Trace[1].Result))
}

// activityAndTask is what a regular activity adds to a history: the activity's
// three events, and the workflow task that handles its completion.
var activityAndTask = map[string]int{
	"ActivityTaskScheduled": 1, "ActivityTaskStarted": 1, "ActivityTaskCompleted": 1,
	"WorkflowTaskScheduled": 1, "WorkflowTaskStarted": 1, "WorkflowTaskCompleted": 1,
}

func plus(a map[string]int, b map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range a {
		out[k] += v
	}
	for k, v := range b {
		out[k] += v
	}
	return out
}

// Exact history events per call, read from real histories of runs with 1, 2
// and 3 calls of each kind (the worker keeps toolgate's search attributes
// current, as under `toolgate dev`).
func TestEventsPerCallKinds(t *testing.T) {
	e, ctx := sharedEnv(t), testCtx(t)
	// A human decision: the task in which the call blocks records the
	// search-attribute upsert (waiting_for_approval) and starts the approval
	// timer; the decision arrives (a signal, or an update accepted and
	// completed) with a workflow task of its own, which cancels the timer,
	// upserts the status back to running and schedules the activity.
	human := map[string]int{"UpsertWorkflowSearchAttributes": 2, "TimerStarted": 1, "TimerCanceled": 1,
		"WorkflowTaskScheduled": 1, "WorkflowTaskStarted": 1, "WorkflowTaskCompleted": 1}
	// A regular activity of AgentRun carries a permit (rules version 11):
	// the toolgate.permit local activity's marker, in the same task.
	permitted := plus(activityAndTask, map[string]int{"MarkerRecorded": 1})
	want := map[string]map[string]int{
		"memo hit":                                    {},
		"miss, regular activity":                      permitted,
		"miss, local activity":                        {"MarkerRecorded": 1},
		"destructive, approved (always_approve)":      permitted,
		"destructive, blocked then approved (signal)": plus(plus(permitted, human), map[string]int{"WorkflowExecutionSignaled": 1}),
		"destructive, blocked then approved (update)": plus(plus(permitted, human),
			map[string]int{"WorkflowExecutionUpdateAccepted": 1, "WorkflowExecutionUpdateCompleted": 1}),
		"bare Temporal: activity":       activityAndTask,
		"bare Temporal: local activity": {"MarkerRecorded": 1},
	}
	rows, err := MeasureEvents(ctx, e, EventKinds, nil)
	require.NoError(t, err)
	require.Len(t, rows, len(want))
	first := map[string]int{}
	for _, row := range rows {
		w, ok := want[row.Kind.Name]
		require.True(t, ok, row.Kind.Name)
		perCall := 0
		for _, v := range w {
			perCall += v
		}
		require.Equal(t, [2]int{perCall, perCall}, row.Delta, "%s: the 2nd and the 3rd call each add the same events", row.Kind.Name)
		require.Equal(t, w, row.ByType, "%s: the events one call adds", row.Kind.Name)
		scheduled := 1
		if row.Kind.Repeat || row.Kind.Tool == EchoLocal {
			scheduled = 0
		}
		require.Equal(t, scheduled, row.Scheduled[2]-row.Scheduled[1], "%s: activities scheduled per call", row.Kind.Name)
		first[row.Kind.Name] = row.Events[0]
	}
	// A one-call run: AgentRun's fixed cost over the bare workflow (the
	// config local activity's marker, status upserts, version markers …) is
	// the same whatever the call; the first human decision costs what every
	// later one does.
	fixed := first["miss, regular activity"] - 1 - first["bare Temporal: activity"] // less the permit's marker
	require.Positive(t, fixed)
	require.Equal(t, fixed, first["miss, local activity"]-first["bare Temporal: local activity"])
	require.Equal(t, first["miss, regular activity"], first["memo hit"])
	require.Equal(t, first["miss, regular activity"], first["destructive, approved (always_approve)"])
	require.Equal(t, first["miss, regular activity"]+14-6, first["destructive, blocked then approved (signal)"])
	require.Equal(t, first["miss, regular activity"]+15-6, first["destructive, blocked then approved (update)"])
	t.Logf("AgentRun's fixed cost over a bare workflow: %d events per run", fixed)
}

// A long run continues as new at its history_limit; call ids go on across
// runs, and every run's history replays against this build.
func TestSessionContinuesAsNewAndReplays(t *testing.T) {
	e, ctx := sharedEnv(t), testCtx(t)
	const calls, limit = 60, 100
	res, err := MeasureSession(ctx, e, Session{Calls: calls}, limit, 1, nil)
	require.NoError(t, err)
	require.GreaterOrEqual(t, res.Runs(), 3)
	for i, n := range res.Events {
		// The limit is checked between steps, at the start of a workflow task:
		// a run ends at most one call (6 events) past it, plus the task that
		// continues as new (2 events: task completed, continued-as-new).
		require.LessOrEqual(t, n, limit+6+2, "run %d", i)
	}

	// The memo is carried over: a read made in the first run is a hit in the last.
	in := Input(workflows.PolicyAlwaysApprove, Calls(Echo, 1, 40), Repeat(Echo, 1, 1))
	in.HistoryLimit = limit
	run, out, err := e.Agent(ctx, in)
	require.NoError(t, err)
	chain, err := e.Chain(ctx, run.ID, run.RunID)
	require.NoError(t, err)
	require.Greater(t, len(chain), 1)
	last := out.Trace[len(out.Trace)-1]
	require.Equal(t, "c-41", last.CallID)
	require.Equal(t, workflows.TraceCacheHit, last.Status)
	for i, r := range out.Trace {
		require.Equal(t, fmt.Sprintf("c-%d", i+1), r.CallID)
	}
	for _, rh := range chain {
		_, err := e.Replay(run.ID, rh)
		require.NoError(t, err)
	}
}

// Local calls run inside workflow tasks; a run of them completes and replays.
func TestLocalSessionReplays(t *testing.T) {
	e, ctx := sharedEnv(t), testCtx(t)
	one, _, err := e.Agent(ctx, Input(workflows.PolicyAlwaysApprove, Calls(EchoLocal, 1, 1)))
	require.NoError(t, err)
	h, err := e.History(ctx, one.ID, one.RunID)
	require.NoError(t, err)
	res, err := MeasureSession(ctx, e, Session{Calls: 300, Local: true}, 4000, 1, nil)
	require.NoError(t, err)
	require.Equal(t, 1, res.Runs())
	require.Equal(t, len(h.Events)+299, res.Events[0], "one marker per call")
}

// The bare baseline makes the same activity calls, with the same request.
func TestBareMakesTheSameCalls(t *testing.T) {
	e, ctx := sharedEnv(t), testCtx(t)
	agent, _, err := e.Agent(ctx, Input(workflows.PolicyAlwaysApprove, Calls(Echo, 1, 2)))
	require.NoError(t, err)
	bare, err := e.Bare(ctx, Calls(Echo, 1, 2))
	require.NoError(t, err)
	ha, err := e.History(ctx, agent.ID, agent.RunID)
	require.NoError(t, err)
	hb, err := e.History(ctx, bare.ID, bare.RunID)
	require.NoError(t, err)
	sa, sb := scheduled(ha), scheduled(hb)
	require.Len(t, sa, 2)
	require.Equal(t, len(sa), len(sb))
	for i := range sa {
		require.Equal(t, sa[i].GetActivityType().GetName(), sb[i].GetActivityType().GetName())
		require.Equal(t, sa[i].GetActivityId(), sb[i].GetActivityId())
		// Same request but for the workflow and run ids inside the
		// idempotency key, and the permit AgentRun's carries (the bare
		// baseline's tools, on a worker of their own, check none).
		var req tool.Request
		require.NoError(t, json.Unmarshal(sa[i].GetInput().GetPayloads()[0].GetData(), &req))
		require.NotEmpty(t, req.Permit, "AgentRun's call carries a permit")
		req.Permit = ""
		raw, err := json.Marshal(req)
		require.NoError(t, err)
		a := strings.ReplaceAll(strings.ReplaceAll(string(raw), agent.ID, "WID"), agent.RunID, "RID")
		b := strings.ReplaceAll(strings.ReplaceAll(string(sb[i].GetInput().GetPayloads()[0].GetData()), bare.ID, "WID"), bare.RunID, "RID")
		require.JSONEq(t, a, b)
	}
}

func scheduled(h *historypb.History) []*historypb.ActivityTaskScheduledEventAttributes {
	var out []*historypb.ActivityTaskScheduledEventAttributes
	for _, ev := range h.Events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			out = append(out, a)
		}
	}
	return out
}

func TestParseSessions(t *testing.T) {
	ss, err := ParseSessions("1000, 10000:local")
	require.NoError(t, err)
	require.Equal(t, []Session{{Calls: 1000}, {Calls: 10000, Local: true}}, ss)
	ss, err = ParseSessions("none")
	require.NoError(t, err)
	require.Empty(t, ss)
	_, err = ParseSessions("ten")
	require.Error(t, err)
}

func TestTableAndVerdicts(t *testing.T) {
	r := &Report{Config: Config{}.withDefaults(), Started: time.Now()}
	r.Throughput = Throughput{Calls: 50, Parallel: 1, Agent: []float64{18, 19}, Bare: []float64{20, 20}, Ratio: []float64{0.9, 0.95},
		AgentTask: []time.Duration{time.Millisecond, time.Millisecond}, BareTask: []time.Duration{time.Millisecond, time.Millisecond}}
	r.Events = []EventRow{{Kind: EventKinds[0], Events: [3]int{14, 14, 14}, Scheduled: [3]int{1, 1, 1}, ByType: map[string]int{}}}
	r.Sessions = []SessionResult{{Session: Session{Calls: 10000, Local: true}, Events: []int{10008}, Tasks: []int{2}, Bytes: []int{1},
		Replay: []time.Duration{2 * time.Second}, Elapsed: time.Second}}
	r.Key = KeyCost{Key: []Cost{{NsPerOp: 100}}, Marshal: []Cost{{NsPerOp: 200}}, RoundTrip: []Cost{{NsPerOp: 400}}}
	v := r.Verdicts()
	require.Len(t, v, 8)
	require.True(t, v[0].Met)              // memo hit: 0 events
	require.False(t, v[1].Met)             // ratio 0.925 < 0.95
	require.True(t, v[2].Ran && !v[2].Met) // 10008 events, 2 s replay
	require.True(t, v[3].Met)              // 0.5x
	for _, v := range v[4:] {              // positions and approvals: nothing measured
		require.False(t, v.Ran, v.Target)
		require.Equal(t, "not run", v.Text())
	}
	var buf bytes.Buffer
	r.Table(&buf)
	require.Contains(t, buf.String(), "| 10000 | echo_local | 1 | 10008 (10008) |")
	require.Contains(t, buf.String(), "MISSED")
	require.Contains(t, buf.String(), "6. Latency by position")
	require.NotContains(t, buf.String(), "8. Side by side", "not a default section")

	// Only the sections asked for are printed, with their verdicts.
	r.Config.Sections = []string{SectionKey}
	require.Len(t, r.Verdicts(), 1)
	buf.Reset()
	r.Table(&buf)
	require.Contains(t, buf.String(), "5. The canonical memo key")
	require.NotContains(t, buf.String(), "1. Calls per second")
}

func TestParseSizesAndSections(t *testing.T) {
	n, err := ParseSizes("200, 1000")
	require.NoError(t, err)
	require.Equal(t, []int{200, 1000}, n)
	n, err = ParseSizes("none")
	require.NoError(t, err)
	require.Empty(t, n)
	_, err = ParseSizes("-3")
	require.Error(t, err)
	s, err := ParseSections("positions,langgraph")
	require.NoError(t, err)
	require.Equal(t, []string{SectionPositions, SectionLangGraph}, s)
	s, err = ParseSections("all")
	require.NoError(t, err)
	require.Equal(t, AllSections, s)
	_, err = ParseSections("speed")
	require.Error(t, err)
}

// ---------------------------------------------------------------------------
// Benchmarks: each b.N iteration is one round; the reported figures are the
// medians over the rounds (run with -benchtime Nx for N rounds).

func BenchmarkAgentRunVsBare(b *testing.B) {
	for _, parallel := range []int{1, 4} {
		b.Run(fmt.Sprintf("runs=%d", parallel), func(b *testing.B) {
			e, ctx := sharedEnv(b), context.Background()
			const calls = 50
			if _, err := ThroughputRound(ctx, e, 10, parallel, true); err != nil { // warm-up
				b.Fatal(err)
			}
			var t Throughput
			for i := 0; b.Loop(); i++ {
				rd, err := ThroughputRound(ctx, e, calls, parallel, i%2 == 0)
				if err != nil {
					b.Fatal(err)
				}
				t.Add(rd)
			}
			b.ReportMetric(Median(t.Agent), "toolgate_calls/s")
			b.ReportMetric(Median(t.Bare), "bare_calls/s")
			b.ReportMetric(Median(t.Ratio), "ratio")
			b.ReportMetric(float64(Median(t.AgentTask).Microseconds()), "toolgate_task_µs/call")
			b.ReportMetric(float64(Median(t.BareTask).Microseconds()), "bare_task_µs/call")
		})
	}
}

func BenchmarkEventsPerCall(b *testing.B) {
	for _, k := range EventKinds {
		name := strings.NewReplacer(" ", "_", ",", "", "(", "", ")", "", ":", "").Replace(k.Name)
		b.Run(name, func(b *testing.B) {
			e, ctx := sharedEnv(b), context.Background()
			var rows []EventRow
			for b.Loop() {
				var err error
				if rows, err = MeasureEvents(ctx, e, []EventKind{k}, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(rows[0].PerCall()), "events/call")
			b.ReportMetric(float64(rows[0].Scheduled[2]-rows[0].Scheduled[1]), "activities/call")
		})
	}
}

func BenchmarkRepeatedRead(b *testing.B) {
	e, ctx := sharedEnv(b), context.Background()
	m := MemoLatency{Hits: 500, Reruns: 20}
	warm := MemoLatency{Hits: 10, Reruns: 2}
	if err := warm.Round(ctx, e, false); err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		if err := m.Round(ctx, e, i%2 == 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(Median(m.Hit).Nanoseconds())/1e3, "hit_µs/call")
	b.ReportMetric(float64(Median(m.Rerun).Nanoseconds())/1e6, "rerun_ms/call")
	b.ReportMetric(float64(Median(m.RerunLocal).Nanoseconds())/1e6, "rerun_local_ms/call")
}

func BenchmarkSession(b *testing.B) {
	for _, s := range []Session{{Calls: 1000}, {Calls: 10000, Local: true}, {Calls: 10000}} {
		b.Run(fmt.Sprintf("calls=%s", strings.ReplaceAll(s.String(), ":", "_")), func(b *testing.B) {
			if s.Calls >= 10000 && !s.Local && testing.Short() {
				b.Skip("10,000 regular activities take minutes; skipped with -short")
			}
			e, ctx := sharedEnv(b), context.Background()
			var events, runs []int
			var replay []time.Duration
			var rate []float64
			for b.Loop() {
				res, err := MeasureSession(ctx, e, s, 4000, 3, nil)
				if err != nil {
					b.Fatal(err)
				}
				events, runs = append(events, res.MaxEvents()), append(runs, res.Runs())
				replay, rate = append(replay, res.MaxReplay()), append(rate, res.CallsPerSecond())
			}
			b.ReportMetric(float64(Median(runs)), "runs")
			b.ReportMetric(float64(Median(events)), "max_events/run")
			b.ReportMetric(float64(Median(replay).Microseconds())/1e3, "max_replay_ms/run")
			b.ReportMetric(Median(rate), "calls/s")
		})
	}
}

func BenchmarkKey(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := KeyOp(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKeyJSONMarshal(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MarshalOp(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKeyJSONRoundTrip(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RoundTripOp(); err != nil {
			b.Fatal(err)
		}
	}
}
