package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config says what a suite run measures.
type Config struct {
	Calls    int       // calls per run in the calls-per-second comparison (default 50)
	Rounds   int       // rounds of every timed comparison (default 5)
	Parallel int       // runs in flight at once on each side of the comparison (default 1)
	Mixed    bool      // run both sides at the same time, Parallel runs in all (MixedRound)
	Hits     int       // memo hits per run for the repeated-read latency (default 500)
	Reruns   int       // re-runs per run for the repeated-read latency (default 20)
	Sessions []Session // long sessions (default: 1000 calls of echo)
	// HistoryLimit is the sessions' history_limit (default 4000, just under
	// the 4,096 events at which Temporal suggests continue-as-new).
	HistoryLimit int
	Replays      int // replays of each session run (default 3)
	// KeyTime is the least time one key measurement runs (default 300ms).
	KeyTime time.Duration
	// Sections are the measurements to make (default DefaultSections).
	Sections []string
	// Positions are the sizes of the latency-by-position runs: for each, one
	// AgentRun and one Bare run of that many sequential echo calls (default
	// 200). PositionLimit is the AgentRun's history_limit there (0: the
	// workflow's default, 8,000: a 1,000-call run stays one run).
	Positions     []int
	PositionLimit int
	// Approvals is the number of approval round trips measured (default 20).
	Approvals int
	// SideBySide are the call counts of the side-by-side runs with
	// LangGraph.js (default 200, 1,000 and 3,000); LangGraphDir is where its
	// harness is installed (default LangGraphDir()).
	SideBySide   []int
	LangGraphDir string
	// ListingRuns are the runs left waiting for the listing section
	// (default TargetListingRuns); ListingBaseline is the number of runs the
	// old one-after-the-other listing is stopped after (default 300; it is
	// also run over every waiting run); ListingRepeats times each first page
	// (default 7); ToolgateBin is a toolgate binary for `toolgate pending`
	// ("": built from this module).
	ListingRuns     int
	ListingBaseline int
	ListingRepeats  int
	ToolgateBin     string
	Log             io.Writer `json:"-"` // progress lines; nil: none
}

// The sections of a suite run: 1 to 5 are the original table, 6 to 8 the
// latency figures of issue #14.
const (
	SectionCalls      = "calls"     // 1. calls per second, AgentRun vs Bare
	SectionEvents     = "events"    // 2. history events per call
	SectionMemo       = "memo"      // 3. a repeated read
	SectionSessions   = "sessions"  // 4. long sessions
	SectionKey        = "key"       // 5. the canonical key
	SectionPositions  = "positions" // 6. latency by position in a run
	SectionApprovals  = "approvals" // 7. the approval round trip
	SectionLangGraph  = "langgraph" // 8. side by side with LangGraph.js (installs its harness with npm)
	SectionListing    = "listing"   // 9. listing the waiting calls (leaves thousands of runs waiting: minutes)
	defaultSizesCalls = "200,1000,3000"
)

// DefaultSections are the sections measured unless told otherwise: all but
// the LangGraph.js side by side, which needs Node.js and an npm install, and
// the listing, which starts thousands of runs.
var DefaultSections = []string{SectionCalls, SectionEvents, SectionMemo, SectionSessions, SectionKey, SectionPositions, SectionApprovals}

// AllSections are every section, in the order they run.
var AllSections = append(slices.Clone(DefaultSections), SectionLangGraph, SectionListing)

// Has says whether the configuration measures section s.
func (c Config) Has(s string) bool { return slices.Contains(c.Sections, s) }

// ParseSections reads "calls,positions" (or "all"), checking the names.
func ParseSections(s string) ([]string, error) {
	if strings.TrimSpace(s) == "all" {
		return slices.Clone(AllSections), nil
	}
	out := []string{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !slices.Contains(AllSections, f) {
			return nil, fmt.Errorf("section %q: want one of %s, or all", f, strings.Join(AllSections, ", "))
		}
		out = append(out, f)
	}
	return out, nil
}

// ParseSizes reads "200,1000" ("none" or "": no sizes).
func ParseSizes(s string) ([]int, error) {
	out := []int{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" || f == "none" || f == "0" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: want a positive number of calls", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Calls, 50)
	def(&c.Rounds, 5)
	def(&c.Parallel, 1)
	def(&c.Hits, 500)
	def(&c.Reruns, 20)
	def(&c.HistoryLimit, 4000)
	def(&c.Replays, 3)
	if c.KeyTime <= 0 {
		c.KeyTime = 300 * time.Millisecond
	}
	if c.Sessions == nil {
		c.Sessions = []Session{{Calls: 1000}}
	}
	if c.Sections == nil {
		c.Sections = slices.Clone(DefaultSections)
	}
	if c.Positions == nil {
		c.Positions = []int{200}
	}
	def(&c.Approvals, 20)
	if c.SideBySide == nil {
		c.SideBySide, _ = ParseSizes(defaultSizesCalls)
	}
	if c.LangGraphDir == "" {
		c.LangGraphDir = LangGraphDir()
	}
	def(&c.ListingRuns, TargetListingRuns)
	def(&c.ListingBaseline, 300)
	def(&c.ListingRepeats, 7)
	return c
}

// ParseSessions reads "1000,10000:local".
func ParseSessions(s string) ([]Session, error) {
	var out []Session
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" || f == "0" || f == "none" {
			continue
		}
		n, local := f, false
		if before, ok := strings.CutSuffix(f, ":local"); ok {
			n, local = before, true
		}
		calls, err := strconv.Atoi(n)
		if err != nil || calls <= 0 {
			return nil, fmt.Errorf("session %q: want a number of calls, optionally followed by :local", f)
		}
		out = append(out, Session{Calls: calls, Local: local})
	}
	if out == nil {
		out = []Session{}
	}
	return out, nil
}

// Machine describes where a suite ran.
type Machine struct {
	CPUs       int
	Model      string
	MemTotal   string
	OS         string
	Go         string
	Server     string // go.temporal.io/server version
	SDK        string // go.temporal.io/sdk version
	DataDir    string
	QueuePoll  int    // the server's queue reads a second per shard
	LoadBefore string // /proc/loadavg before and after
	LoadAfter  string
}

// Report is everything a suite run measured.
type Report struct {
	Config     Config
	Machine    Machine
	Started    time.Time
	Elapsed    time.Duration
	Throughput Throughput
	Events     []EventRow
	Memo       MemoLatency
	Sessions   []SessionResult
	Key        KeyCost
	Positions  []PositionRun
	Approvals  Approvals
	SideBySide SideBySide
	Listing    Listing
}

// Run runs the suite's sections on e, in the order of AllSections but for
// the sessions, which run last (the table keeps its order).
func Run(ctx context.Context, e *Env, c Config) (*Report, error) {
	c = c.withDefaults()
	r := &Report{Config: c, Started: time.Now(), Machine: machine(e.DataDir)}
	r.Machine.QueuePoll = e.QueuePoll
	var err error
	logf(c.Log, "load average: %s", r.Machine.LoadBefore)
	if c.Has(SectionCalls) {
		if r.Throughput, err = MeasureThroughput(ctx, e, c.Calls, c.Rounds, c.Parallel, c.Mixed, c.Log); err != nil {
			return nil, fmt.Errorf("calls per second: %w", err)
		}
	}
	if c.Has(SectionEvents) {
		if r.Events, err = MeasureEvents(ctx, e, EventKinds, c.Log); err != nil {
			return nil, fmt.Errorf("events per call: %w", err)
		}
	}
	if c.Has(SectionMemo) {
		if r.Memo, err = MeasureMemoLatency(ctx, e, c.Hits, c.Reruns, c.Rounds, c.Log); err != nil {
			return nil, fmt.Errorf("repeated read: %w", err)
		}
	}
	if c.Has(SectionKey) {
		r.Key = MeasureKey(c.Rounds, c.KeyTime, c.Log)
	}
	if c.Has(SectionPositions) {
		if r.Positions, err = MeasurePositions(ctx, e, c.Positions, c.PositionLimit, c.Log); err != nil {
			return nil, fmt.Errorf("latency by position: %w", err)
		}
	}
	if c.Has(SectionApprovals) {
		if r.Approvals, err = MeasureApprovals(ctx, e, c.Approvals, c.Log); err != nil {
			return nil, fmt.Errorf("approval round trip: %w", err)
		}
	}
	if c.Has(SectionLangGraph) {
		if r.SideBySide, err = MeasureSideBySide(ctx, e, c.SideBySide, c.HistoryLimit, c.LangGraphDir, c.Log); err != nil {
			return nil, fmt.Errorf("side by side with LangGraph.js: %w", err)
		}
	}
	if c.Has(SectionListing) {
		if r.Listing, err = MeasureListing(ctx, e, c.ListingRuns, c.ListingBaseline, c.ListingRepeats, c.ToolgateBin, c.Log); err != nil {
			return nil, fmt.Errorf("listing: %w", err)
		}
	}
	// The sessions run last: each of their activities leaves a start-to-close
	// timer on the server that fires after tool.DefaultTimeout (30 s), and
	// ten thousand of them firing keep the server busy for minutes, which
	// would slow every section measured after them.
	if c.Has(SectionSessions) {
		for _, s := range c.Sessions {
			res, err := MeasureSession(ctx, e, s, c.HistoryLimit, c.Replays, c.Log)
			if err != nil {
				return nil, fmt.Errorf("session %s: %w", s, err)
			}
			r.Sessions = append(r.Sessions, res)
		}
	}
	r.Elapsed = time.Since(r.Started)
	r.Machine.LoadAfter = loadavg()
	return r, nil
}

func machine(dataDir string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version(),
		DataDir: dataDir, LoadBefore: loadavg(), Model: procField("/proc/cpuinfo", "model name"), MemTotal: procField("/proc/meminfo", "MemTotal")}
	if kb, err := strconv.Atoi(strings.TrimSuffix(m.MemTotal, " kB")); err == nil {
		m.MemTotal = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "go.temporal.io/server":
				m.Server = d.Version
			case "go.temporal.io/sdk":
				m.SDK = d.Version
			}
		}
	}
	return m
}

// procField returns the value of the first "name: value" line of a /proc file.
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
