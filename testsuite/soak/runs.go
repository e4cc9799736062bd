package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// runTimeout bounds one run, decisions and worker deaths included.
const runTimeout = 3 * time.Minute

// input is the run of one kind.
func input(kind string) workflows.RunInput {
	call := func(name, args string) []tool.Proposal {
		return []tool.Proposal{{Tool: name, Args: json.RawMessage(args)}}
	}
	scripted := func(steps ...[]tool.Proposal) plan.Config {
		return plan.Config{Kind: plan.KindScripted, Turns: steps, Answer: "done"}
	}
	refund := call("refund", `{"booking_id":"BK-2","amount_cents":1,"reason":"soak"}`)
	in := workflows.RunInput{Goal: kind}
	switch kind {
	case "read":
		in.Planner = scripted(call("search_tickets", `{"query":"login"}`), call("search_tickets", `{"query":"login"}`))
	case "fallback":
		in.Planner = scripted(call("carrier_status", `{"order_id":"ORD-1001"}`))
	case "expire":
		in.Planner = scripted(refund)
		in.ApprovalTimeout = workflows.Duration(2 * time.Second)
	default:
		in.Planner = scripted(refund)
	}
	return in
}

// want is the trace status a run of each kind must have recorded.
var want = map[string]string{
	"read": workflows.TraceCacheHit, "fallback": workflows.TraceFallback, "expire": workflows.TraceExpired,
	"approve-update": workflows.TraceOK, "approve-signal": workflows.TraceOK, "reject": workflows.TraceRejected,
}

// oneRun starts one run of kind, decides its call as the kind says, waits for
// its result and checks it; ok says the run ended as expected.
func oneRun(ctx context.Context, tg *tgclient.Client, c client.Client, id, kind string) (ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	if _, err := tg.Start(ctx, id, input(kind)); err != nil {
		return false, fmt.Errorf("start: %w", err)
	}
	if kind == "approve-update" || kind == "approve-signal" || kind == "reject" {
		it, err := awaitInterrupt(ctx, tg, id)
		if err != nil {
			return false, err
		}
		in := workflows.DecisionInput{CallID: it.CallID, Approver: "soak", ArgsDigest: it.ArgsDigest, Kind: it.Kind}
		switch kind {
		case "approve-update":
			_, err = tg.Decide(ctx, id, true, in)
		case "approve-signal":
			err = c.SignalWorkflow(ctx, id, "", workflows.SignalApprove, in)
		default:
			in.Reason = "soak says no"
			err = c.SignalWorkflow(ctx, id, "", workflows.SignalReject, in)
		}
		if err != nil {
			return false, fmt.Errorf("%s: %w", kind, err)
		}
	}
	res, err := tg.Result(ctx, id)
	if err != nil {
		return false, fmt.Errorf("result: %w", err)
	}
	if res.Status != workflows.StatusCompleted || len(res.Trace) == 0 {
		return false, fmt.Errorf("status %s (%s), %d trace records", res.Status, res.Error, len(res.Trace))
	}
	var statuses []string
	for _, r := range res.Trace {
		statuses = append(statuses, r.Tool+" "+r.Status)
		if r.Status == want[kind] {
			return true, nil
		}
	}
	return false, fmt.Errorf("trace %v has no %s record", statuses, want[kind])
}

// awaitInterrupt polls the run's state until its call waits for a decision.
func awaitInterrupt(ctx context.Context, tg *tgclient.Client, id string) (workflows.Interrupt, error) {
	var last error
	for {
		st, err := tg.State(ctx, id)
		if err == nil && len(st.Interrupts) > 0 {
			return st.Interrupts[0], nil
		}
		last = err
		select {
		case <-ctx.Done():
			return workflows.Interrupt{}, fmt.Errorf("no interrupt (last error %v): %w", last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// workers are the worker processes, one of which the killer replaces now and
// then.
type workers struct {
	bin  string
	args []string
	mu   sync.Mutex
	ps   []*proc
}

func newWorkers(bin string, args []string, n int) (*workers, error) {
	w := &workers{bin: bin, args: args}
	for range n {
		p, err := startProc(bin, args...)
		if err != nil {
			w.stop()
			return nil, err
		}
		w.ps = append(w.ps, p)
	}
	return w, nil
}

// killEvery kills -9 a random worker every d and starts a new one in its
// place, until the returned function is called (which returns the kills).
func (w *workers) killEvery(d time.Duration, log io.Writer) func() int {
	if d <= 0 {
		return func() int { return 0 }
	}
	stop, stopped := make(chan struct{}), make(chan int)
	go func() {
		kills := 0
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-stop:
				stopped <- kills
				return
			case <-t.C:
			}
			w.mu.Lock()
			i := rand.IntN(len(w.ps))
			w.ps[i].kill()
			kills++
			p, err := startProc(w.bin, w.args...)
			if err != nil {
				if log != nil {
					fmt.Fprintf(log, "restarting worker: %v\n", err)
				}
			} else {
				w.ps[i] = p
			}
			w.mu.Unlock()
		}
	}()
	return func() int { close(stop); return <-stopped }
}

func (w *workers) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.ps {
		p.kill()
	}
}
