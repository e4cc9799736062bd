package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The latency figures of sections 6 to 8 are only reported: these tests check
// what they are made of (exact counts, parts that add up), never a timing.

// requireSane checks one call's parts: none negative, and they add up to its total.
func requireSane(t *testing.T, c CallTiming) {
	t.Helper()
	var sum time.Duration
	for i, d := range c.Parts() {
		require.GreaterOrEqual(t, d, time.Duration(0), "%s: %s", c.ActivityID, PartNames[i])
		sum += d
	}
	require.Equal(t, c.Total, sum, c.ActivityID)
	require.Positive(t, c.Total, c.ActivityID)
}

// A real 5-call run of each workflow, read by position: every call found, in
// order, with its parts.
func TestPositionsOfARealRun(t *testing.T) {
	e, ctx := sharedEnv(t), testCtx(t)
	// One regular call adds 6 events (AgentRun's 7: its permit's marker); a
	// 1-call run has 17 (AgentRun) or 11 (bare): see TestEventsPerCallKinds.
	for wf, events := range map[string]int{WorkflowAgentRun: 17 + 4*7, WorkflowBare: 11 + 4*6} {
		p, err := PositionsOf(ctx, e, wf, 5, 0)
		require.NoError(t, err, wf)
		require.Equal(t, []int{events}, p.Events, wf)
		require.Len(t, p.Timings, 5, wf)
		require.Empty(t, p.Boundaries, wf)
		for i, c := range p.Timings {
			require.Equal(t, fmt.Sprintf("c-%d", i+1), c.ActivityID, wf)
			require.Equal(t, i+1, c.Position)
			require.Equal(t, 0, c.Run)
			require.Equal(t, Echo, c.ActivityType)
			require.EqualValues(t, 1, c.Attempt)
			requireSane(t, c)
			if i > 0 {
				require.False(t, c.Scheduled.Before(p.Timings[i-1].Scheduled), "scheduled in order")
			}
		}
		s := p.Summary
		require.Equal(t, [2]int{1, 2}, [2]int{s.First.From, s.First.To}, "fewer than 100 calls: the first and the last half, not overlapping")
		require.Equal(t, [2]int{4, 5}, [2]int{s.Last.From, s.Last.To})
		require.Equal(t, [2]int{1, 5}, [2]int{s.Head.From, s.Head.To}, "the first 10, or fewer")
		require.Len(t, s.All.P50, len(PartNames))
		t.Logf("%s: per call p50 %v; first %v, last %v", wf, s.All.P50Total, s.First.P50Total, s.Last.P50Total)
	}
}

// Across continue-as-new: calls are numbered through the chain, the
// boundaries between runs are counted apart.
func TestPositionsAcrossContinueAsNew(t *testing.T) {
	e, ctx := sharedEnv(t), testCtx(t)
	p, err := PositionsOf(ctx, e, WorkflowAgentRun, 30, 100)
	require.NoError(t, err)
	require.GreaterOrEqual(t, p.Runs(), 2)
	require.Len(t, p.Timings, 30)
	require.Len(t, p.Boundaries, p.Runs()-1)
	for _, b := range p.Boundaries {
		require.Positive(t, b)
	}
	run := 0
	for i, c := range p.Timings {
		require.Equal(t, i+1, c.Position)
		require.Equal(t, fmt.Sprintf("c-%d", i+1), c.ActivityID, "call ids go on across runs")
		require.GreaterOrEqual(t, c.Run, run)
		run = c.Run
		requireSane(t, c)
	}
	require.Equal(t, p.Runs()-1, run)
}

// One approval round trip: the update is accepted, then the approved call's
// activity is scheduled and started, then the run closes.
func TestApprovalRoundTrip(t *testing.T) {
	e, ctx := sharedEnv(t), testCtx(t)
	rt, err := ApprovalRoundTrip(ctx, e, 1)
	require.NoError(t, err)
	require.Equal(t, 26, rt.Events, "a 1-call run blocked then approved by update (TestEventsPerCallKinds)")
	require.Positive(t, rt.Update)
	require.GreaterOrEqual(t, rt.ToScheduled, time.Duration(0))
	require.GreaterOrEqual(t, rt.ToStarted, rt.ToScheduled)
	require.GreaterOrEqual(t, rt.ToClosed, rt.ToStarted)
	var a Approvals
	a.Add(rt)
	require.Equal(t, 1, a.Runs)
}

// The tables of sections 6 to 8 and their verdicts, on made-up figures.
func TestLatencyTablesAndVerdicts(t *testing.T) {
	r := &Report{Config: Config{Sections: []string{SectionPositions, SectionApprovals, SectionLangGraph}}.withDefaults(), Started: time.Now()}
	calls := func(n int, first, last time.Duration) []CallTiming {
		var out []CallTiming
		for i := range n {
			d := first + (last-first)*time.Duration(i)/time.Duration(n-1)
			out = append(out, CallTiming{Position: i + 1, TaskWait: d - time.Millisecond, TaskRun: time.Millisecond, Total: d})
		}
		return out
	}
	for _, wf := range []string{WorkflowAgentRun, WorkflowBare} {
		ts := calls(1000, 10*time.Millisecond, 50*time.Millisecond)
		r.Positions = append(r.Positions, PositionRun{Workflow: wf, Calls: 1000, Events: []int{6016}, Elapsed: 30 * time.Second, Timings: ts, Summary: Summarize(ts)})
	}
	r.Approvals = Approvals{Runs: 2, Update: []time.Duration{ms, 2 * ms}, ToScheduled: []time.Duration{ms, ms}, ToStarted: []time.Duration{30 * ms, 50 * ms}, ToClosed: []time.Duration{60 * ms, 70 * ms}}
	lg := &LangGraphResult{Calls: 200, CallsPerSecond: 220, Variant: LangGraphEcho}
	r.SideBySide = SideBySide{HistoryLimit: 4000, Rows: []SideBySideRow{{Calls: 200,
		Local:   ToolgateRun{Tool: EchoLocal, Calls: 200, Runs: 1, Elapsed: 40 * time.Millisecond},
		Regular: ToolgateRun{Tool: Echo, Calls: 200, Runs: 1, Elapsed: 10 * time.Second}, Echo: lg}}}

	v := r.Verdicts()
	require.Len(t, v, 6)
	growth, call, vsBare, approval, local, regular := v[0], v[1], v[2], v[3], v[4], v[5]
	require.True(t, growth.Ran)
	require.False(t, growth.Met)
	require.Regexp(t, `^missed by 3\.\d\d×$`, growth.Text(), "≈ 30/10 over 1.3")
	require.False(t, call.Met)
	require.True(t, vsBare.Met)
	require.Equal(t, "missed by 1.50×", approval.Text(), "the p50 of {30, 50} ms (nearest rank) is 30 ms")
	require.True(t, local.Met, "5,000 vs 220 calls/s")
	require.Equal(t, "missed by 5.50×", regular.Text(), "220 / (20 × 2)")

	var buf bytes.Buffer
	r.Table(&buf)
	out := buf.String()
	require.Contains(t, out, "| AgentRun, 1000 calls (1 run, 30s, 33.3 calls/s) | first 10 |")
	require.Contains(t, out, "|  | first 50 |")
	require.Contains(t, out, "7. The approval round trip")
	require.Contains(t, out, "| 200 | 5000 calls/s")
	require.Contains(t, out, "missed by 5.50×")
}

// The Node harness, with a tiny N, where it is installed: a checkpoint after
// every step (the gate's and the tool's) plus the input's and the first.
func TestLangGraphHarness(t *testing.T) {
	dir := LangGraphDir()
	if err := LangGraphReady(dir); err != nil {
		msg := fmt.Sprintf("the LangGraph.js side by side cannot run: %v. It is installed by `go run ./cmd/toolgate-bench --langgraph` "+
			"(npm ci into %s) or by .ci/run (TOOLGATE_LANGGRAPH_DIR); tests never install it", err, dir)
		if os.Getenv("TOOLGATE_REQUIRE_LANGGRAPH") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	require.NoError(t, json.Unmarshal(harnessFile("package.json"), &pkg))
	const calls = 5
	for _, v := range []string{LangGraphEcho, LangGraphRead} {
		r, err := RunLangGraph(testCtx(t), dir, calls, v)
		require.NoError(t, err, v)
		require.Equal(t, "langgraph.js", r.Framework)
		require.Equal(t, pkg.Dependencies["@langchain/langgraph"], r.LangGraph, "the pinned version runs")
		require.Equal(t, "@langchain/langgraph-checkpoint-sqlite "+pkg.Dependencies["@langchain/langgraph-checkpoint-sqlite"], r.Checkpointer)
		require.Equal(t, calls, r.Calls)
		require.Equal(t, calls, r.Trace)
		require.Equal(t, 2*calls+2, r.Checkpoints, "%s: one checkpoint per step, two steps per call", v)
		require.Positive(t, r.Seconds)
		require.Positive(t, r.CallsPerSecond)
		require.Positive(t, r.DBBytes)
	}
}
