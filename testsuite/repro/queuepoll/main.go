// Command queuepoll reproduces, with nothing of toolgate but its embedded
// server, what bounded one run to 20 calls a second: a workflow makes N
// sequential activity calls, once on a server with the stock queue poll
// rate (20 reads a second per history shard) and once with toolgate's
// (devserver.QueuePollRPS), and each call's time is split by the run's own
// event times.
//
//	go run ./testsuite/repro/queuepoll [--calls 200] [--persistence] [--blockprofile PREFIX] [--cpuprofile PREFIX]
//
// --persistence also prints the server's persistence requests per call, by
// operation, with their mean latency (from the server's own metrics), for
// a short run and for a run of --calls calls. --blockprofile writes a block
// profile of each server (PREFIX-stock.pb.gz, PREFIX-toolgate.pb.gz) for
// `go tool pprof`; --cpuprofile a CPU profile of each long run (the same
// names), and both print the CPU time the process used per call.
//
// On the stock rate, calls after the rate limiter's first burst take 50 ms,
// almost all of it between WorkflowTaskScheduled and WorkflowTaskStarted:
// the history shard's transfer queue reader waits for its next read slot
// before it hands the workflow task to matching. BENCHMARKS.md has the
// figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/common/metrics/metricstest"

	"github.com/toolgate/toolgate/devserver"
)

func echo(_ context.Context, n int) (int, error) { return n, nil }

// Seq makes n sequential calls of the echo activity.
func Seq(ctx workflow.Context, n int) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	for i := range n {
		if err := workflow.ExecuteActivity(ctx, "echo", i).Get(ctx, nil); err != nil {
			return i, err
		}
	}
	return n, nil
}

func main() {
	calls := flag.Int("calls", 200, "sequential activity calls per run")
	persistence := flag.Bool("persistence", false, "print the server's persistence requests per call")
	blockProfile := flag.String("blockprofile", "", "write block profiles to PREFIX-stock.pb.gz and PREFIX-toolgate.pb.gz")
	cpuProfile := flag.String("cpuprofile", "", "write CPU profiles of the long runs to PREFIX-stock.pb.gz and PREFIX-toolgate.pb.gz")
	flag.Parse()
	for _, stock := range []bool{true, false} {
		if err := measure(context.Background(), *calls, stock, *persistence, *blockProfile, *cpuProfile); err != nil {
			fmt.Fprintln(os.Stderr, "queuepoll:", err)
			os.Exit(1)
		}
	}
}

func measure(ctx context.Context, calls int, stock, persistence bool, blockProfile, cpuProfile string) error {
	dir, err := os.MkdirTemp("", "queuepoll-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	opts := devserver.Options{DataDir: dir}
	name := fmt.Sprintf("toolgate's queue poll rate (%d reads a second per shard)", devserver.QueuePollRPS)
	if stock {
		opts.DynamicConfig = devserver.StockQueuePolling()
		name = "the stock queue poll rate (20 reads a second per shard)"
	}
	var metrics *metricstest.CaptureHandler
	if persistence {
		metrics = metricstest.NewCaptureHandler()
		opts.Metrics = metrics
	}
	srv, err := devserver.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer srv.Stop()
	quiet := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: srv.Namespace(), Logger: quiet})
	if err != nil {
		return err
	}
	defer c.Close()
	w := sdkworker.New(c, "queuepoll", sdkworker.Options{})
	w.RegisterWorkflow(Seq)
	w.RegisterActivityWithOptions(echo, activity.RegisterOptions{Name: "echo"})
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()

	fmt.Printf("%s:\n", name)
	if persistence {
		// A short run first, to compare the requests per call and their
		// cost when the history is short and when it is long.
		if _, err := runSeq(ctx, c, "short", 20, metrics); err != nil {
			return err
		}
	}
	suffix := "-toolgate.pb.gz"
	if stock {
		suffix = "-stock.pb.gz"
	}
	if blockProfile != "" {
		runtime.SetBlockProfileRate(int(time.Microsecond))
		defer runtime.SetBlockProfileRate(0)
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile + suffix)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	cpuBefore := cpuTime()
	h, err := runSeq(ctx, c, "long", calls, metrics)
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	fmt.Printf("  CPU time of the process (server, worker, SQLite) per call: %.2f ms\n", ms((cpuTime()-cpuBefore)/time.Duration(calls)))
	printSplit(h)
	if blockProfile != "" {
		f, err := os.Create(blockProfile + suffix)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.Lookup("block").WriteTo(f, 0); err != nil {
			return err
		}
	}
	return nil
}

// runSeq runs Seq over calls calls and returns its history; with metrics, it
// prints the persistence requests the server made meanwhile, per call.
func runSeq(ctx context.Context, c client.Client, id string, calls int, metrics *metricstest.CaptureHandler) (*historypb.History, error) {
	var capture *metricstest.Capture
	if metrics != nil {
		capture = metrics.StartCapture()
		defer metrics.StopCapture(capture)
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "queuepoll"}, Seq, calls)
	if err != nil {
		return nil, err
	}
	if err := run.Get(ctx, nil); err != nil {
		return nil, err
	}
	h := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, err
		}
		h.Events = append(h.Events, e)
	}
	first, last := h.Events[0].GetEventTime().AsTime(), h.Events[len(h.Events)-1].GetEventTime().AsTime()
	fmt.Printf("  run of %d calls (%d events): %v, %.1f calls/s\n", calls, len(h.Events), last.Sub(first).Round(time.Millisecond),
		float64(calls)/last.Sub(first).Seconds())
	if capture != nil {
		printPersistence(capture.Snapshot(), calls)
	}
	return h, nil
}

// printPersistence prints the persistence requests of a capture per call, by
// operation, with their mean latency.
func printPersistence(snap metricstest.CaptureSnapshot, calls int) {
	type op struct {
		n     int
		total time.Duration
	}
	ops := map[string]*op{}
	for _, r := range snap["persistence_latency"] {
		d, ok := r.Value.(time.Duration)
		if !ok {
			continue
		}
		name := r.Tags["operation"]
		if ops[name] == nil {
			ops[name] = &op{}
		}
		ops[name].n++
		ops[name].total += d
	}
	names := slices.Sorted(maps.Keys(ops))
	slices.SortStableFunc(names, func(a, b string) int { return ops[b].n - ops[a].n })
	var n int
	var total time.Duration
	for _, name := range names {
		o := ops[name]
		n += o.n
		total += o.total
		if float64(o.n)/float64(calls) >= 0.05 {
			fmt.Printf("    %-36s %5.2f per call, mean %7.3f ms\n", name, float64(o.n)/float64(calls), ms(o.total/time.Duration(o.n)))
		}
	}
	fmt.Printf("    %-36s %5.2f per call, %.2f ms per call\n", "all persistence requests", float64(n)/float64(calls), ms(total/time.Duration(calls)))
}

// printSplit prints the median of each part of a call, for the first and the
// last 20 calls, from the history's event times.
func printSplit(h *historypb.History) {
	var gap, wftWait, wftRun []time.Duration
	var prevSched, wftSched time.Time
	for _, e := range h.Events {
		t := e.GetEventTime().AsTime()
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if !prevSched.IsZero() {
				gap = append(gap, t.Sub(prevSched))
			}
			prevSched = t
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			wftSched = t
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			wftWait = append(wftWait, t.Sub(wftSched))
			wftSched = t
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			wftRun = append(wftRun, t.Sub(wftSched))
		}
	}
	const k = 20
	for _, part := range []struct {
		name string
		xs   []time.Duration
	}{{"call (scheduled to next scheduled)", gap}, {"workflow task scheduled → started", wftWait}, {"workflow task started → completed", wftRun}} {
		if len(part.xs) < 2*k {
			continue
		}
		fmt.Printf("  %-36s first %d: %7.2f ms   last %d: %7.2f ms\n", part.name, k, ms(median(part.xs[:k])), k, ms(median(part.xs[len(part.xs)-k:])))
	}
}

func median(xs []time.Duration) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
