package bench

import (
	"fmt"
	"time"
)

// Targets of issue #14 (reported, never asserted in tests).
const (
	// TargetGrowth: the last 50 calls of a 1,000-call regular-activity run
	// cost at most 1.3× the first 50 (p50 of the per-call latency).
	TargetGrowth      = 1.3
	TargetGrowthCalls = 1000
	// TargetCall: a sequential regular-activity call costs at most 10 ms
	// median (>= 100 calls/s for one run) ...
	TargetCall = 10 * time.Millisecond
	// ... and AgentRun's is within 5 % of bare's.
	TargetAgentVsBare = 1.05
	// TargetApproval: update accepted → the approved call's activity
	// started, median.
	TargetApproval = 20 * time.Millisecond
	// TargetRegularVsLangGraph: toolgate on regular activities within 2× of
	// LangGraph.js at 200 calls (and ahead of it on local-activity reads at
	// every size).
	TargetRegularVsLangGraph      = 2.0
	TargetRegularVsLangGraphCalls = 200
)

// positionRun is the AgentRun (or bare) run of the most calls measured by position.
func (r *Report) positionRun(workflow string) (PositionRun, bool) {
	var best PositionRun
	ok := false
	for _, p := range r.Positions {
		if p.Workflow == workflow && (!ok || p.Calls > best.Calls) {
			best, ok = p, true
		}
	}
	return best, ok
}

func (r *Report) positionVerdicts() []Verdict {
	if !r.Config.Has(SectionPositions) {
		return nil
	}
	agent, ok := r.positionRun(WorkflowAgentRun)
	bare, okBare := r.positionRun(WorkflowBare)
	growth := Verdict{Target: fmt.Sprintf("per-call latency is flat: the last 50 calls of a %d-call regular-activity run cost <= %.1fx the first 50 (p50)", TargetGrowthCalls, TargetGrowth)}
	call := Verdict{Target: fmt.Sprintf("a sequential regular-activity call costs <= %s median (>= %.0f calls/s for one run)", dur(TargetCall), float64(time.Second)/float64(TargetCall))}
	vsBare := Verdict{Target: fmt.Sprintf("AgentRun's call within %.0f %% of bare's (p50)", (TargetAgentVsBare-1)*100)}
	if !ok {
		return []Verdict{growth, call, vsBare}
	}
	s := agent.Summary
	growth.Figure = fmt.Sprintf("AgentRun, %d calls: %.2fx (%s → %s; the first %d: %s)", agent.Calls, s.Growth, dur(s.First.P50Total), dur(s.Last.P50Total), s.Head.Calls(), dur(s.Head.P50Total))
	if okBare {
		growth.Figure += fmt.Sprintf("; bare: %.2fx", bare.Summary.Growth)
	}
	if agent.Calls >= TargetGrowthCalls {
		growth.Ran, growth.Met, growth.Factor = true, s.Growth <= TargetGrowth, s.Growth/TargetGrowth
	} else {
		growth.Figure += fmt.Sprintf(" (not a %d-call run: add --positions %d)", TargetGrowthCalls, TargetGrowthCalls)
	}
	p50 := s.All.P50Total
	call.Ran, call.Met, call.Factor = true, p50 <= TargetCall, float64(p50)/float64(TargetCall)
	call.Figure = fmt.Sprintf("AgentRun, %d calls: p50 %s, %.1f calls/s", agent.Calls, dur(p50), agent.CallsPerSecond())
	if okBare && bare.Calls == agent.Calls {
		ratio := float64(p50) / float64(bare.Summary.All.P50Total)
		vsBare.Ran, vsBare.Met, vsBare.Factor = true, ratio <= TargetAgentVsBare, ratio/TargetAgentVsBare
		vsBare.Figure = fmt.Sprintf("%.3fx (%s vs %s, %d calls)", ratio, dur(p50), dur(bare.Summary.All.P50Total), agent.Calls)
	}
	return []Verdict{growth, call, vsBare}
}

func (r *Report) tablePositions(p printer) {
	limit := "the workflow's default"
	if r.Config.PositionLimit > 0 {
		limit = fmt.Sprint(r.Config.PositionLimit)
	}
	p("6. Latency by position: sequential echo calls (regular activities, distinct arguments), from the server's event times. A call runs from its ActivityTaskScheduled to the WorkflowTaskCompleted of the task that received its result (in a sequential run: the gap to the next call's ActivityTaskScheduled); its five parts add up to it. Cells: p50 / p99 (nearest rank); the first 10 calls are shown apart, so that a change within the first 50 shows. AgentRun's history_limit: %s (it also continues as new when Temporal suggests it); continue-as-new boundaries belong to no call.", limit)
	p("")
	head := "| run | calls | per call |"
	line := "|---|---|---:|"
	for _, n := range PartNames {
		head += " " + n + " |"
		line += "---:|"
	}
	p("%s", head)
	p("%s", line)
	for _, run := range r.Positions {
		s := run.Summary
		name := fmt.Sprintf("%s, %d calls (%d run%s, %v, %.1f calls/s)", run.Workflow, run.Calls, run.Runs(), plural(run.Runs()), run.Elapsed.Round(100*time.Millisecond), run.CallsPerSecond())
		for i, w := range []Window{s.Head, s.First, s.Last, s.All} {
			label := fmt.Sprintf("first %d", w.Calls())
			if i == 2 {
				label = fmt.Sprintf("last %d", w.Calls())
			} else if i == 3 {
				label = "all"
			}
			row := fmt.Sprintf("| %s | %s | %s / %s |", name, label, ms2(w.P50Total), ms2(w.P99Total))
			for k := range PartNames {
				row += fmt.Sprintf(" %s / %s |", ms2(w.P50[k]), ms2(w.P99[k]))
			}
			p("%s", row)
			name = ""
		}
		row := fmt.Sprintf("| | last / first (p50) | **%.2fx** |", s.Growth)
		for k := range PartNames {
			row += " " + ratioText(s.Last.P50[k], s.First.P50[k]) + " |"
		}
		p("%s", row)
		if len(run.Boundaries) > 0 {
			p("| | %d continue-as-new boundaries (ContinuedAsNew → next run's first ActivityTaskScheduled) | %s / %s | | | | | |",
				len(run.Boundaries), ms2(Percentile(run.Boundaries, 50)), ms2(Percentile(run.Boundaries, 99)))
		}
	}
	p("")
	verdicts(p, r.positionVerdicts())
	p("")
}

func (r *Report) approvalVerdicts() []Verdict {
	if !r.Config.Has(SectionApprovals) {
		return nil
	}
	v := Verdict{Target: fmt.Sprintf("approval round trip: update accepted → the approved call's activity started <= %s median", dur(TargetApproval))}
	a := r.Approvals
	if a.Runs > 0 {
		p50 := Percentile(a.ToStarted, 50)
		v.Ran, v.Met, v.Factor = true, p50 <= TargetApproval, float64(p50)/float64(TargetApproval)
		v.Figure = fmt.Sprintf("p50 %s, p99 %s (%d approvals)", dur(p50), dur(Percentile(a.ToStarted, 99)), a.Runs)
	}
	return []Verdict{v}
}

func (r *Report) tableApprovals(p printer) {
	a := r.Approvals
	p("7. The approval round trip: %d runs of one destructive call (write) under the human policy, blocked at the gate and approved with the approve update as soon as the state query shows it waiting; p50 / p99 (nearest rank)", a.Runs)
	p("")
	p("| | p50 | p99 |")
	p("|---|---:|---:|")
	if a.Runs > 0 {
		p("| (a) approve update sent → returned, stage completed (client clock) | %s | %s |", ms2(Percentile(a.Update, 50)), ms2(Percentile(a.Update, 99)))
		p("| (b) WorkflowExecutionUpdateAccepted → the approved call's ActivityTaskStarted | %s | %s |", ms2(Percentile(a.ToStarted, 50)), ms2(Percentile(a.ToStarted, 99)))
		p("| of which UpdateAccepted → ActivityTaskScheduled | %s | %s |", ms2(Percentile(a.ToScheduled, 50)), ms2(Percentile(a.ToScheduled, 99)))
		p("| (c) WorkflowExecutionUpdateAccepted → the run's close event | %s | %s |", ms2(Percentile(a.ToClosed, 50)), ms2(Percentile(a.ToClosed, 99)))
	}
	p("")
	verdicts(p, r.approvalVerdicts())
	p("")
}

func (r *Report) sideBySideVerdicts() []Verdict {
	if !r.Config.Has(SectionLangGraph) {
		return nil
	}
	sb := r.SideBySide
	var out []Verdict
	regular := Verdict{Target: fmt.Sprintf("toolgate on regular activities within %.0fx of LangGraph.js at %d calls", TargetRegularVsLangGraph, TargetRegularVsLangGraphCalls)}
	for _, row := range sb.Rows {
		v := Verdict{Target: fmt.Sprintf("toolgate with local-activity reads ahead of LangGraph.js at %d calls", row.Calls)}
		lg := row.BestLangGraph()
		if lg == 0 {
			v.Figure = "LangGraph.js not run: " + sb.Skipped
			out = append(out, v)
			continue
		}
		local := row.Local.CallsPerSecond()
		v.Ran, v.Met, v.Factor = true, local > lg, lg/local
		v.Figure = fmt.Sprintf("%.0f vs %.0f calls/s (%.2fx)", local, lg, local/lg)
		out = append(out, v)
		if row.Calls == TargetRegularVsLangGraphCalls {
			reg := row.Regular.CallsPerSecond()
			regular.Ran, regular.Met, regular.Factor = true, reg*TargetRegularVsLangGraph >= lg, lg/(reg*TargetRegularVsLangGraph)
			regular.Figure = fmt.Sprintf("%.1f vs %.0f calls/s: LangGraph.js %.1fx faster", reg, lg, lg/reg)
		}
	}
	if !regular.Ran && regular.Figure == "" {
		regular.Figure = fmt.Sprintf("not run (add %d to --langgraph-calls, with Node.js)", TargetRegularVsLangGraphCalls)
	}
	return append(out, regular)
}

func (r *Report) tableSideBySide(p printer) {
	sb := r.SideBySide
	p("8. Side by side with LangGraph.js, one after the other on this machine: N sequential calls of an echo tool with distinct arguments. toolgate: AgentRun (always_approve; history_limit %d), run time from its events (first start to last close). LangGraph.js: a graph gate → tool (echo) or gate → memo → tool (read), SqliteSaver on a file, a checkpoint after every step, one invoke timed in the process. Per call: p50 / p99 (nearest rank).", sb.HistoryLimit)
	p("")
	if sb.Skipped != "" {
		p("LangGraph.js: skipped — %s", sb.Skipped)
		p("")
	} else if len(sb.Rows) > 0 && sb.Rows[0].Echo != nil {
		e := sb.Rows[0].Echo
		p("LangGraph.js %s, %s, Node.js %s, durability %q (the default), harness in %s", e.LangGraph, e.Checkpointer, e.Node, e.Durability, sb.Dir)
		p("")
	}
	p("| calls | toolgate, local-activity reads | toolgate, regular activities | LangGraph.js echo (gate → tool) | LangGraph.js read (gate → memo → tool) | local / LangGraph.js best | regular / LangGraph.js best |")
	p("|---:|---:|---:|---:|---:|---:|---:|")
	for _, row := range sb.Rows {
		lg := row.BestLangGraph()
		ratio := func(x float64) string {
			if lg == 0 {
				return "—"
			}
			return fmt.Sprintf("%.2fx", x/lg)
		}
		p("| %d | %.0f calls/s (%s, %d run%s) | %.1f calls/s, %s / %s (%d run%s) | %s | %s | %s | %s |", row.Calls,
			row.Local.CallsPerSecond(), dur(row.Local.Elapsed), row.Local.Runs, plural(row.Local.Runs),
			row.Regular.CallsPerSecond(), ms2(row.Regular.P50), ms2(row.Regular.P99), row.Regular.Runs, plural(row.Regular.Runs),
			langGraphCell(row.Echo), langGraphCell(row.Read), ratio(row.Local.CallsPerSecond()), ratio(row.Regular.CallsPerSecond()))
	}
	p("")
	verdicts(p, r.sideBySideVerdicts())
	p("")
}

func langGraphCell(l *LangGraphResult) string {
	if l == nil {
		return "not run"
	}
	return fmt.Sprintf("%.1f calls/s, %.2f / %.2f ms (%d checkpoints, largest %s)", l.CallsPerSecond, l.P50Ms, l.P99Ms, l.Checkpoints, kb(l.MaxCheckpointBytes))
}

// ms2 prints a duration in milliseconds with two decimals.
func ms2(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func kb(b int64) string { return fmt.Sprintf("%.1f KB", float64(b)/1000) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func ratioText(a, b time.Duration) string {
	if b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(b))
}
