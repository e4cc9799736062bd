// Package soak runs toolgate under load with faults: one server (`toolgate
// dev --no-worker`, on SQLite or PostgreSQL), several `toolgate worker`
// processes of which one is killed -9 (and replaced) every few seconds, and
// many runs of mixed kinds — reads with memo hits, approvals by update and by
// signal, rejections, approvals that expire, and reads that fail, are
// retried and fall back. At the end every run must be closed with the status
// and trace its kind expects, the desk must hold exactly one payment per
// approved call, and no workflow may still be open. `go run
// ./cmd/toolgate-soak` runs it (BENCHMARKS.md); it is not part of go test.
package soak

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/activities/desk"
	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/demo"
)

// Config says what to run.
type Config struct {
	Bin       string        // the toolgate binary (Build)
	Postgres  string        // a PostgreSQL server URL: fresh databases on it; "" for SQLite
	Runs      int           // runs in all
	InFlight  int           // runs open at once
	Workers   int           // worker processes
	KillEvery time.Duration // kill -9 one worker this often (0: never)
	Log       io.Writer     // progress
}

// Result is what a soak measured and found.
type Result struct {
	Backend    string         `json:"backend"`
	Runs       int            `json:"runs"`
	Kinds      map[string]int `json:"kinds"`
	Elapsed    time.Duration  `json:"elapsed_ns"`
	RunsPerSec float64        `json:"runs_per_sec"`
	P50, P99   time.Duration  `json:"-"`
	Max        time.Duration  `json:"-"`
	Kills      int            `json:"kills"`
	Approved   int            `json:"approved"`
	Payments   int            `json:"payments"`
	Open       int64          `json:"open_workflows"`
	Failures   []string       `json:"failures"`
}

// kinds of runs, in the order they are mixed.
var kinds = []string{"read", "approve-update", "approve-signal", "reject", "expire", "fallback"}

// Run runs one soak.
func Run(ctx context.Context, cfg Config) (res Result, err error) {
	res = Result{Backend: "sqlite", Runs: cfg.Runs, Kinds: map[string]int{}}
	dir, err := os.MkdirTemp("", "toolgate-soak-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	devArgs := []string{"dev", "--no-worker", "--address", "127.0.0.1:0", "--data", dir}
	// The workers poll with the worker token dev writes (devserver.WorkerTokenFile
	// under DATA/auth); without it a client has a person's role.
	workerArgs := []string{"worker", "--search-attributes", "--data", dir, "--token-file", filepath.Join(dir, "auth", "worker.token")}
	deskAt := filepath.Join(dir, demo.DeskFile)
	if cfg.Postgres != "" {
		res.Backend = "postgresql"
		dbs, drop, err := freshDatabases(cfg.Postgres, 2)
		if err != nil {
			return res, err
		}
		defer drop()
		devArgs = append(devArgs, "--db", dbs[0])
		workerArgs = append(workerArgs, "--desk-db", dbs[1])
		deskAt = dbs[1]
	}
	server, err := startProc(cfg.Bin, devArgs...)
	if err != nil {
		return res, err
	}
	defer server.kill()
	addr, err := server.awaitReady(2 * time.Minute)
	if err != nil {
		return res, err
	}
	workerArgs = append(workerArgs, "--address", addr)
	c, err := client.DialContext(ctx, client.Options{HostPort: addr})
	if err != nil {
		return res, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer c.Close()

	pool, err := newWorkers(cfg.Bin, workerArgs, cfg.Workers)
	if err != nil {
		return res, err
	}
	defer pool.stop()
	stopKiller := pool.killEvery(cfg.KillEvery, cfg.Log)

	began := time.Now()
	durations, failures, approved := runAll(ctx, c, cfg, &res)
	res.Elapsed = time.Since(began)
	res.Kills = stopKiller()
	res.Failures, res.Approved = failures, approved
	res.RunsPerSec = float64(cfg.Runs) / res.Elapsed.Seconds()
	slices.Sort(durations)
	if n := len(durations); n > 0 {
		res.P50, res.P99, res.Max = durations[n/2], durations[min(n-1, n*99/100)], durations[n-1]
	}

	// Side effects equal approvals; nothing is left open.
	d, err := desk.Connect(deskAt)
	if err != nil {
		return res, err
	}
	defer d.Close()
	pays, err := d.Payments(ctx, "BK-2")
	if err != nil {
		return res, err
	}
	keys := map[string]bool{}
	for _, p := range pays {
		if strings.HasPrefix(p.IdempotencyKey, "soak-") {
			res.Payments++
			keys[p.IdempotencyKey] = true
		}
	}
	if res.Payments != approved || len(keys) != approved {
		res.Failures = append(res.Failures, fmt.Sprintf("%d payments under %d keys for %d approved calls", res.Payments, len(keys), approved))
	}
	open, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: "default", Query: `ExecutionStatus = "Running"`})
	if err != nil {
		return res, fmt.Errorf("count open workflows: %w", err)
	}
	res.Open = open.GetCount()
	if res.Open != 0 {
		res.Failures = append(res.Failures, fmt.Sprintf("%d workflows still open", res.Open))
	}
	return res, nil
}

// runAll runs cfg.Runs runs, cfg.InFlight at a time, and returns each run's
// duration (start to result, on the client's clock), what went wrong and
// how many calls were approved.
func runAll(ctx context.Context, c client.Client, cfg Config, res *Result) ([]time.Duration, []string, int) {
	tg := tgclient.New(c)
	var mu sync.Mutex
	var durations []time.Duration
	var failures []string
	var approved, done atomic.Int64
	sem := make(chan struct{}, cfg.InFlight)
	var wg sync.WaitGroup
	for i := range cfg.Runs {
		kind := kinds[i%len(kinds)]
		res.Kinds[kind]++
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			id := fmt.Sprintf("soak-%05d-%s", i, kind)
			began := time.Now()
			ok, err := oneRun(ctx, tg, c, id, kind)
			took := time.Since(began)
			mu.Lock()
			defer mu.Unlock()
			durations = append(durations, took)
			if err != nil {
				failures = append(failures, fmt.Sprintf("%s: %v", id, err))
			}
			if ok && strings.HasPrefix(kind, "approve") {
				approved.Add(1)
			}
			if n := done.Add(1); cfg.Log != nil && n%100 == 0 {
				fmt.Fprintf(cfg.Log, "%d/%d runs done\n", n, cfg.Runs)
			}
		})
	}
	wg.Wait()
	sort.Strings(failures)
	return durations, failures, int(approved.Load())
}
