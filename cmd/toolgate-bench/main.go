// Command toolgate-bench measures the cost of toolgate's safety side by side
// with bare Temporal, on an embedded server in this process, and prints the
// table (BENCHMARKS.md explains every figure):
//
//	go run ./cmd/toolgate-bench [--calls N] [--rounds R] [--parallel P] [--mixed] [--hits N] [--reruns N]
//	                            [--session LIST] [--history-limit N] [--replays N]
//	                            [--positions LIST] [--positions-history-limit N] [--approvals M]
//	                            [--langgraph] [--langgraph-calls LIST] [--langgraph-dir DIR]
//	                            [--listing] [--listing-runs N] [--listing-baseline N]
//	                            [--only SECTIONS] [--stock-queue-polling] [--data DIR] [--json FILE] [--quiet]
//
// --langgraph adds the side by side with LangGraph.js: it installs the Node
// harness of testsuite/bench/langgraph with `npm ci` into --langgraph-dir
// (outside the repository) the first time, and skips LangGraph.js with a
// message where Node.js is missing.
//
// --listing adds the listing of waiting calls (section 9): it leaves
// --listing-runs runs waiting for approval (default 5,000: minutes to start
// on a small machine), times the first pages of client.Pending, the inbox's
// API and `toolgate pending` (built from this module), and the old listing
// of every run one after the other as the baseline.
//
// It is a command of its own so that the toolgate binary links none of the
// benchmark suite (testsuite/bench).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/toolgate/toolgate/testsuite/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "toolgate-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("toolgate-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	calls := fs.Int("calls", 50, "calls per run in the calls-per-second comparison")
	rounds := fs.Int("rounds", 5, "rounds of every timed comparison (figures are their medians)")
	parallel := fs.Int("parallel", 1, "runs in flight at once on each side of the calls-per-second comparison")
	mixed := fs.Bool("mixed", false, "run both sides of the calls-per-second comparison at the same time (--parallel runs in all)")
	hits := fs.Int("hits", 500, "memo hits per run for the repeated-read latency")
	reruns := fs.Int("reruns", 20, "re-runs per run for the repeated-read latency")
	sessions := fs.String("session", "1000", "long sessions to run, comma-separated: N calls of echo, or N:local for echo_local (\"none\": skip)")
	limit := fs.Int("history-limit", 4000, "history_limit of the sessions")
	replays := fs.Int("replays", 3, "replays of each session run")
	positions := fs.String("positions", "200", "latency by position: calls per run, comma-separated (one AgentRun and one bare run each; e.g. 200,1000; \"none\": skip)")
	positionLimit := fs.Int("positions-history-limit", 0, "history_limit of the AgentRuns measured by position (0: the workflow's default, 8000)")
	approvals := fs.Int("approvals", 20, "approval round trips to measure (0: skip)")
	langgraph := fs.Bool("langgraph", false, "add the side by side with LangGraph.js (installs its harness with npm ci the first time; needs Node.js)")
	langgraphCalls := fs.String("langgraph-calls", "200,1000,3000", "calls per run of the side by side, comma-separated")
	langgraphDir := fs.String("langgraph-dir", bench.LangGraphDir(), "where the LangGraph.js harness is installed ($TOOLGATE_LANGGRAPH_DIR)")
	listing := fs.Bool("listing", false, "add the listing of waiting calls (section 9; starts --listing-runs runs: minutes)")
	listingRuns := fs.Int("listing-runs", bench.TargetListingRuns, "runs left waiting for approval in the listing section")
	listingBaseline := fs.Int("listing-baseline", 300, "runs the old one-after-the-other listing is stopped after (it is also run over every waiting run)")
	only := fs.String("only", "", "measure only these sections, comma-separated: "+strings.Join(bench.AllSections, ", ")+" (default: all but langgraph and listing; --langgraph and --listing add them)")
	data := fs.String("data", "", "data directory of the embedded server (default: a temporary directory, removed afterwards)")
	jsonOut := fs.String("json", "", "also write the raw figures as JSON to this file")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	stock := fs.Bool("stock-queue-polling", false, "run the server with the stock queue poll rate (20 reads a second per shard) instead of toolgate's, as a baseline")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if pos := fs.Args(); len(pos) > 0 {
		return fmt.Errorf("toolgate-bench takes no arguments, got %q", pos)
	}
	ss, err := bench.ParseSessions(*sessions)
	if err != nil {
		return err
	}
	pos, err := bench.ParseSizes(*positions)
	if err != nil {
		return fmt.Errorf("--positions: %w", err)
	}
	lgCalls, err := bench.ParseSizes(*langgraphCalls)
	if err != nil {
		return fmt.Errorf("--langgraph-calls: %w", err)
	}
	sections := slices.Clone(bench.DefaultSections)
	if *only != "" {
		if sections, err = bench.ParseSections(*only); err != nil {
			return fmt.Errorf("--only: %w", err)
		}
	}
	if *langgraph && !slices.Contains(sections, bench.SectionLangGraph) {
		sections = append(sections, bench.SectionLangGraph)
	}
	if *listing && !slices.Contains(sections, bench.SectionListing) {
		sections = append(sections, bench.SectionListing)
	}
	sections = slices.DeleteFunc(sections, func(s string) bool {
		return (s == bench.SectionPositions && len(pos) == 0) || (s == bench.SectionApprovals && *approvals <= 0) ||
			(s == bench.SectionLangGraph && len(lgCalls) == 0)
	})
	var progress io.Writer = stderr
	if *quiet {
		progress = nil
	}
	fmt.Fprintln(stderr, "starting the embedded Temporal server and a worker…")
	env, err := bench.Start(ctx, bench.Options{DataDir: *data, StockQueuePolling: *stock})
	if err != nil {
		return err
	}
	defer env.Stop()
	report, err := bench.Run(ctx, env, bench.Config{Calls: *calls, Rounds: *rounds, Parallel: *parallel, Mixed: *mixed, Hits: *hits,
		Reruns: *reruns, Sessions: ss, HistoryLimit: *limit, Replays: *replays, Sections: sections, Positions: pos, PositionLimit: *positionLimit,
		Approvals: *approvals, SideBySide: lgCalls, LangGraphDir: *langgraphDir,
		ListingRuns: *listingRuns, ListingBaseline: *listingBaseline, Log: progress})
	if err != nil {
		return err
	}
	report.Table(stdout)
	if *jsonOut != "" {
		b, err := json.MarshalIndent(report, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
