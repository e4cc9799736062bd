package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Targets from the issue.
const (
	TargetRatio     = 0.95
	TargetRunEvents = 10000
	TargetReplay    = time.Second
	TargetKeyFactor = 2.0
)

// Verdict is one target's outcome.
type Verdict struct {
	Target string
	Met    bool
	Ran    bool
	Figure string
	// Factor, for a missed target that has one, is how far the figure is
	// from it (> 1): the verdict then reads "missed by 3.2×".
	Factor float64
}

// Text is the verdict's word: "met", "not run", "missed by X×" or "MISSED".
func (v Verdict) Text() string {
	switch {
	case !v.Ran:
		return "not run"
	case v.Met:
		return "met"
	case v.Factor > 0:
		return fmt.Sprintf("missed by %.2f×", v.Factor)
	}
	return "MISSED"
}

// Verdicts checks the targets against the figures.
func (r *Report) Verdicts() []Verdict {
	var out []Verdict
	c := r.Config
	v := Verdict{Target: "a memo hit adds 0 history events and schedules 0 activities"}
	for _, row := range r.Events {
		if row.Kind.Repeat && !row.Kind.Bare {
			v.Ran = true
			v.Met = row.Delta == [2]int{0, 0} && row.Scheduled[0] == row.Scheduled[2]
			v.Figure = fmt.Sprintf("+%d events, +%d activities scheduled per hit", row.PerCall(), row.Scheduled[2]-row.Scheduled[1])
		}
	}
	if c.Has(SectionEvents) {
		out = append(out, v)
	}
	ratio := Median(r.Throughput.Ratio)
	if c.Has(SectionCalls) {
		out = append(out, Verdict{Target: fmt.Sprintf("gated misses reach >= %.0f %% of bare calls/s", TargetRatio*100), Ran: len(r.Throughput.Ratio) > 0,
			Met: ratio >= TargetRatio, Figure: fmt.Sprintf("%.1f %% (median ratio of %d rounds)", ratio*100, len(r.Throughput.Ratio))})
	}
	ran := false
	for _, s := range r.Sessions {
		if s.Calls < 10000 || !c.Has(SectionSessions) {
			continue
		}
		ran = true
		out = append(out, Verdict{
			Target: fmt.Sprintf("every run of a %d-call session (%s) has < %d events; replaying one run takes < %v", s.Calls, s.Tool(), TargetRunEvents, TargetReplay),
			Ran:    true, Met: s.MaxEvents() < TargetRunEvents && s.MaxReplay() < TargetReplay,
			Figure: fmt.Sprintf("%d runs, max %d events/run, max replay %s", s.Runs(), s.MaxEvents(), dur(s.MaxReplay())),
		})
	}
	if !ran && c.Has(SectionSessions) {
		out = append(out, Verdict{Target: fmt.Sprintf("every run of a 10,000-call session has < %d events; replaying one run takes < %v", TargetRunEvents, TargetReplay),
			Figure: "not run (add --session 10000 or 10000:local)"})
	}
	if c.Has(SectionKey) {
		k, m := MedianCost(r.Key.Key), MedianCost(r.Key.Marshal)
		out = append(out, Verdict{Target: fmt.Sprintf("the canonical key costs <= %.0fx json.Marshal", TargetKeyFactor), Ran: len(r.Key.Key) > 0,
			Met: k.NsPerOp <= TargetKeyFactor*m.NsPerOp, Figure: fmt.Sprintf("%.2fx (%.0f vs %.0f ns/op)", k.NsPerOp/m.NsPerOp, k.NsPerOp, m.NsPerOp)})
	}
	out = append(out, r.positionVerdicts()...)
	out = append(out, r.approvalVerdicts()...)
	out = append(out, r.sideBySideVerdicts()...)
	out = append(out, r.listingVerdicts()...)
	return out
}

// Table writes the report as Markdown tables.
func (r *Report) Table(w io.Writer) {
	c, m := r.Config, r.Machine
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("toolgate bench, %s (took %v)", r.Started.Format(time.RFC3339), r.Elapsed.Round(time.Second))
	p("")
	p("machine: %d CPUs (%s), %s RAM, %s, %s; load average before %s, after %s", m.CPUs, m.Model, m.MemTotal, m.OS, m.Go, m.LoadBefore, m.LoadAfter)
	p("server: embedded go.temporal.io/server %s, SQLite file (WAL) under %s, history queues read at most %d times a second per shard; one worker, go.temporal.io/sdk %s", m.Server, m.DataDir, m.QueuePoll, m.SDK)
	p("")

	if c.Has(SectionCalls) {
		r.tableCalls(p)
	}
	if c.Has(SectionEvents) {
		r.tableEvents(p)
	}
	if c.Has(SectionMemo) {
		r.tableMemo(p)
	}
	if c.Has(SectionSessions) {
		r.tableSessions(p)
	}
	if c.Has(SectionKey) {
		r.tableKey(p)
	}
	if c.Has(SectionPositions) {
		r.tablePositions(p)
	}
	if c.Has(SectionApprovals) {
		r.tableApprovals(p)
	}
	if c.Has(SectionLangGraph) {
		r.tableSideBySide(p)
	}
	if c.Has(SectionListing) {
		r.tableListing(p)
	}

	p("Targets")
	p("")
	verdicts(p, r.Verdicts())
}

// verdicts writes a table of verdicts.
func verdicts(p printer, vs []Verdict) {
	p("| target | figure | |")
	p("|---|---|---|")
	for _, v := range vs {
		p("| %s | %s | %s |", v.Target, v.Figure, v.Text())
	}
}

// printer writes one line.
type printer func(format string, args ...any)

func (r *Report) tableCalls(p printer) {
	t := r.Throughput
	if t.Mixed {
		p("1. Calls per second, %d sequential calls per run, %d runs in flight, half of each side at the same time (per side: calls over its median run time); medians of %d rounds, ratio per round", t.Calls, t.Parallel, len(t.Ratio))
	} else {
		p("1. Calls per second, %d sequential calls per run, %d run(s) at a time per side (run time: first start to last close, server times); medians of %d rounds, ratio per round", t.Calls, t.Parallel, len(t.Ratio))
	}
	p("")
	p("| | toolgate AgentRun (always_approve, all misses) | bare workflow, same activities | toolgate / bare (min–max) |")
	p("|---|---:|---:|---:|")
	if len(t.Ratio) > 0 {
		p("| calls per second | %.1f | %.1f | %.3f (%.3f–%.3f) |", Median(t.Agent), Median(t.Bare), Median(t.Ratio), minOf(t.Ratio), maxOf(t.Ratio))
		at, bt := Median(t.AgentTask), Median(t.BareTask)
		p("| workflow-task time per call | %s | %s | +%s per call |", dur(at), dur(bt), dur(at-bt))
	}
	p("")
}

func (r *Report) tableEvents(p printer) {
	p("2. History events added per call (exact counts from real histories of runs with 1, 2 and 3 calls)")
	p("")
	p("| call | events, 1/2/3 calls | added per call | activities scheduled per call | the added events |")
	p("|---|---:|---:|---:|---|")
	for _, row := range r.Events {
		p("| %s | %d / %d / %d | %s | %d | %s |", row.Kind.Name, row.Events[0], row.Events[1], row.Events[2],
			deltaText(row.Delta), row.Scheduled[2]-row.Scheduled[1], byTypeText(row.ByType))
	}
	p("")
}

func (r *Report) tableMemo(p printer) {
	mm := r.Memo
	p("3. A repeated read, per call (medians of %d rounds; %d hits, %d re-runs per run; hit and local re-run from workflow-task time, regular re-run from run time)", len(mm.Hit), mm.Hits, mm.Reruns)
	p("")
	p("| served from the memo | (hit, workflow code alone, in replay) | run again (regular activity) | run again (local activity) | memo speed-up |")
	p("|---:|---:|---:|---:|---:|")
	if len(mm.Hit) > 0 {
		hit, rerun, local := Median(mm.Hit), Median(mm.Rerun), Median(mm.RerunLocal)
		p("| %s | %s | %s | %s | %s vs regular, %s vs local |", dur(hit), dur(Median(mm.HitReplay)), dur(rerun), dur(local), speedup(rerun, hit), speedup(local, hit))
	}
	p("")
}

func (r *Report) tableSessions(p printer) {
	c := r.Config
	p("4. Long sessions with continue-as-new (history_limit %d; distinct arguments, all misses; %d replays per run, median)", c.HistoryLimit, c.Replays)
	p("")
	p("| calls | tool | runs | events per run (max) | workflow tasks per run (max) | history bytes per run (max) | replay of one run (max) | replay.File of the longest run (JSON bytes) | run time | calls/s |")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range r.Sessions {
		p("| %d | %s | %d | %s (%d) | %d | %d | %s | %s (%d) | %v | %.1f |", s.Calls, s.Tool(), s.Runs(), intsText(s.Events), s.MaxEvents(),
			slices.Max(s.Tasks), s.MaxBytes(), dur(s.MaxReplay()), dur(s.FileReplay), s.FileBytes, s.Elapsed.Round(100*time.Millisecond), s.CallsPerSecond())
	}
	p("")
}

func (r *Report) tableKey(p printer) {
	c := r.Config
	k, ma, rt := MedianCost(r.Key.Key), MedianCost(r.Key.Marshal), MedianCost(r.Key.RoundTrip)
	p("5. The canonical memo key of %s (timed loops of at least %v, medians of %d rounds)", KeyArgs, c.KeyTime, len(r.Key.Key))
	p("")
	p("| | ns/op | allocs/op | B/op | vs json.Marshal |")
	p("|---|---:|---:|---:|---:|")
	if len(r.Key.Key) > 0 {
		p("| tool.Key (from raw bytes) | %.0f | %d | %d | %.2fx |", k.NsPerOp, k.AllocsPerOp, k.BytesPerOp, k.NsPerOp/ma.NsPerOp)
		p("| json.Marshal (of the decoded map) | %.0f | %d | %d | 1.00x |", ma.NsPerOp, ma.AllocsPerOp, ma.BytesPerOp)
		p("| json.Unmarshal + json.Marshal (from raw bytes) | %.0f | %d | %d | %.2fx |", rt.NsPerOp, rt.AllocsPerOp, rt.BytesPerOp, rt.NsPerOp/ma.NsPerOp)
	}
	p("")

}

func deltaText(d [2]int) string {
	if d[0] == d[1] {
		return fmt.Sprintf("+%d", d[1])
	}
	return fmt.Sprintf("+%d then +%d", d[0], d[1])
}

func byTypeText(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %+d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func intsText(xs []int) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, strconv.Itoa(x))
	}
	if len(parts) > 6 {
		parts = append(parts[:3], append([]string{"…"}, parts[len(parts)-2:]...)...)
	}
	return strings.Join(parts, ", ")
}

func dur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + dur(-d)
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

func speedup(slow, fast time.Duration) string {
	if fast <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0fx", float64(slow)/float64(fast))
}

func minOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}

func maxOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
