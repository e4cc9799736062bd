// Command resultstall reproduces the result long poll that misses a run's
// close: it starts many short runs, a few at a time, waits for each one's
// result, and reports how long after the run's close event each wait
// returned.
//
//	go run ./testsuite/repro/resultstall [--runs 6000] [--parallel 16] [--via sdk|toolgate]
//
// With --via sdk (the SDK's WorkflowRun.Get, one long poll for the close
// event) about one wait in a thousand returns ~20 s late: the server's long
// poll (history's GetOrPollWorkflowMutableState) listens on a channel that
// holds one notification, and service/history/events/notifier.go drops a
// notification that arrives while the previous one is still unread; when
// the dropped one is the close, the poll waits out its 20 s expiration
// (history.longPollExpirationInterval). With --via toolgate (client.Result,
// which also asks once a second whether the run has closed) no wait returns
// more than about a second late. BENCHMARKS.md has the figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/workflows"
)

func echo(_ context.Context, n int) (int, error) { return n, nil }

// Short makes one activity call and ends with a result shaped like
// AgentRun's, so that client.Result can read it.
func Short(ctx workflow.Context) (workflows.RunResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	if err := workflow.ExecuteActivity(ctx, "echo", 1).Get(ctx, nil); err != nil {
		return workflows.RunResult{}, err
	}
	return workflows.RunResult{Status: workflows.StatusCompleted}, nil
}

func main() {
	runs := flag.Int("runs", 6000, "short runs to wait for")
	parallel := flag.Int("parallel", 16, "runs in flight at once")
	via := flag.String("via", "sdk", "how to wait: sdk (WorkflowRun.Get) or toolgate (client.Result)")
	flag.Parse()
	if *via != "sdk" && *via != "toolgate" {
		fmt.Fprintln(os.Stderr, "resultstall: --via is sdk or toolgate")
		os.Exit(2)
	}
	if err := reproduce(context.Background(), *runs, *parallel, *via == "toolgate"); err != nil {
		fmt.Fprintln(os.Stderr, "resultstall:", err)
		os.Exit(1)
	}
}

func reproduce(ctx context.Context, runs, parallel int, viaToolgate bool) error {
	dir, err := os.MkdirTemp("", "resultstall-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := devserver.Start(ctx, devserver.Options{DataDir: dir})
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
	w := sdkworker.New(c, "resultstall", sdkworker.Options{})
	w.RegisterWorkflow(Short)
	w.RegisterActivityWithOptions(echo, activity.RegisterOptions{Name: "echo"})
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	tg := tgclient.New(c)

	wait := func(id string, run client.WorkflowRun) error {
		if viaToolgate {
			_, err := tg.Result(ctx, id)
			return err
		}
		var res workflows.RunResult
		return run.Get(ctx, &res)
	}
	lags := make([]time.Duration, runs)
	errs := make(chan error, parallel)
	ids := make(chan int)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for i := range ids {
				id := fmt.Sprintf("short-%d", i)
				run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "resultstall"}, Short)
				if err == nil {
					err = wait(id, run)
				}
				returned := time.Now()
				if err == nil {
					var closedAt time.Time
					closedAt, err = closeTime(ctx, c, id)
					lags[i] = returned.Sub(closedAt)
				}
				if err != nil {
					errs <- fmt.Errorf("run %s: %w", id, err)
					return
				}
			}
		})
	}
	start := time.Now()
feed:
	for i := range runs {
		select {
		case ids <- i:
		case err := <-errs:
			close(ids)
			wg.Wait()
			return err
		case <-ctx.Done():
			break feed
		}
	}
	close(ids)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	how := "WorkflowRun.Get (the SDK)"
	if viaToolgate {
		how = "client.Result (toolgate)"
	}
	late := 0
	for i, l := range lags {
		if l > 2*time.Second {
			late++
			fmt.Printf("short-%d: result %v after the run closed\n", i, l.Round(time.Millisecond))
		}
	}
	sorted := slices.Clone(lags)
	slices.Sort(sorted)
	fmt.Printf("%s, %d runs (%d in flight) in %v: result after close p50 %v, p99 %v, max %v; %d more than 2 s late\n",
		how, runs, parallel, time.Since(start).Round(time.Second), sorted[runs/2].Round(time.Microsecond),
		sorted[runs*99/100].Round(time.Microsecond), sorted[runs-1].Round(time.Millisecond), late)
	return nil
}

// closeTime is the server's time of the run's close event.
func closeTime(ctx context.Context, c client.Client, id string) (time.Time, error) {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	e, err := it.Next()
	if err != nil {
		return time.Time{}, err
	}
	return e.GetEventTime().AsTime(), nil
}
