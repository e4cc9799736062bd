// Command toolgate-soak runs toolgate's soak (testsuite/soak) on SQLite and,
// with --postgres, on PostgreSQL, and prints runs/s and run times:
//
//	go run ./cmd/toolgate-soak --runs 1000 --postgres postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable
//
// It exits 1 if any run ended otherwise than expected, side effects differ
// from approvals, or a workflow is left open.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/toolgate/toolgate/testsuite/testenv"

	"github.com/toolgate/toolgate/testsuite/soak"
)

func main() {
	runs := flag.Int("runs", 300, "runs per database")
	inFlight := flag.Int("in-flight", 32, "runs open at once")
	workers := flag.Int("workers", 3, "worker processes")
	killEvery := flag.Duration("kill-every", 5*time.Second, "kill -9 one worker (and start a new one) this often; 0: never")
	pg := flag.String("postgres", os.Getenv("TOOLGATE_TEST_POSTGRES"), "PostgreSQL server URL (fresh databases are made on it); empty: SQLite only")
	only := flag.String("only", "", "run on one database only: sqlite or postgresql")
	jsonOut := flag.String("json", "", "also write the results as JSON to this file")
	flag.Parse()

	dir, err := os.MkdirTemp("", "toolgate-soak-bin-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	bin, err := testenv.BuildToolgate(dir) // the fault switches stay off: the soak kills workers from outside
	if err != nil {
		fail(err)
	}
	var results []soak.Result
	bad := false
	for _, backend := range []string{"sqlite", "postgresql"} {
		if *only != "" && *only != backend || backend == "postgresql" && *pg == "" {
			continue
		}
		cfg := soak.Config{Bin: bin, Runs: *runs, InFlight: *inFlight, Workers: *workers, KillEvery: *killEvery, Log: os.Stderr}
		if backend == "postgresql" {
			cfg.Postgres = *pg
		}
		fmt.Fprintf(os.Stderr, "soak on %s: %d runs, %d in flight, %d workers, one killed every %v\n", backend, *runs, *inFlight, *workers, *killEvery)
		r, err := soak.Run(context.Background(), cfg)
		if err != nil {
			fail(fmt.Errorf("soak on %s: %w", backend, err))
		}
		results = append(results, r)
		bad = bad || len(r.Failures) > 0
	}
	fmt.Println("| database | runs | kinds | workers killed | runs/s | p50 run | p99 run | max run | payments / approvals | open at end | failures |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range results {
		fmt.Printf("| %s | %d | %s | %d | %.1f | %v | %v | %v | %d / %d | %d | %d |\n", r.Backend, r.Runs, kindsLine(r.Kinds), r.Kills,
			r.RunsPerSec, r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), r.Max.Round(time.Millisecond),
			r.Payments, r.Approved, r.Open, len(r.Failures))
		for _, f := range r.Failures {
			fmt.Fprintf(os.Stderr, "%s: %s\n", r.Backend, f)
		}
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			fail(err)
		}
	}
	if bad {
		os.Exit(1)
	}
}

func kindsLine(k map[string]int) string {
	var parts []string
	for _, name := range []string{"read", "approve-update", "approve-signal", "reject", "expire", "fallback"} {
		parts = append(parts, fmt.Sprintf("%s %d", name, k[name]))
	}
	return strings.Join(parts, ", ")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "toolgate-soak:", err)
	os.Exit(1)
}
