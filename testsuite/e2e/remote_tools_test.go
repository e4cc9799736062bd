package e2e

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/toolgate/toolgate/permit"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// remoteQueue is the task queue of the tools another worker hosts here.
const remoteQueue = "e2e-remote-tools"

// refundHost is a worker of another team (in any language; here Go, by
// activity type name only, checking permits with permit.Guard) that hosts
// refund_remote: it pays once per
// idempotency key, and its first attempt can hang after paying, as a worker
// does that dies between its side effect and its answer.
type refundHost struct {
	mu       sync.Mutex
	paid     map[string]string // idempotency key -> refund id
	attempts map[string]int
	hang     chan struct{} // closed: no attempt hangs any more
}

func (h *refundHost) refund(ctx context.Context, req tool.Request) (json.RawMessage, error) {
	h.mu.Lock()
	h.attempts[req.IdempotencyKey]++
	id, ok := h.paid[req.IdempotencyKey]
	if !ok {
		id = "R-" + req.CallID
		h.paid[req.IdempotencyKey] = id
	}
	first := h.attempts[req.IdempotencyKey] == 1
	h.mu.Unlock()
	if first {
		select { // paid, and never answers: the worker is killed now
		case <-h.hang:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return json.Marshal(map[string]any{"refund_id": id, "paid": true, "args": req.Args})
}

// start starts a worker hosting refund_remote on remoteQueue, its tool
// checking each request's permit against the worker public key in the
// stack's data directory (permit.Guard): start it after the toolgate worker,
// which writes that file.
// (docs/remote-tools.md shows its region.)
func (h *refundHost) start(s *stack) sdkworker.Worker {
	// README:begin
	v, err := permit.HostVerifier(s.workerPub()) // the gate's DATA/worker.pub
	if err != nil {
		s.t.Fatalf("the remote tools' worker: %v", err)
	}
	w := sdkworker.New(s.client, remoteQueue, sdkworker.Options{})
	w.RegisterActivityWithOptions(permit.Guard(v, h.refund), activity.RegisterOptions{Name: "refund_remote"})
	// README:end
	if err := w.Start(); err != nil {
		s.t.Fatalf("starting the remote tools' worker: %v", err)
	}
	return w
}

// A destructive tool hosted by another worker on its own task queue: the
// gate holds it (a rejected call never reaches that worker), and an approved
// call pays once though the worker that hosts it stops between paying and
// answering, and another takes the retry with the same idempotency key.
func TestRemoteToolIsGatedAndPaysOnceAcrossItsWorkersRestart(t *testing.T) {
	s := newStack(t)
	s.startWorkerWith(func(o *worker.Options) {
		o.Tools = append(o.Tools, tool.Tool{Spec: tool.Spec{Name: "refund_remote", TaskQueue: remoteQueue, Destructive: true,
			Timeout: 2 * time.Second, Retry: tool.RetryPolicy{MaxAttempts: 5, InitialInterval: 200 * time.Millisecond}}})
	})
	h := &refundHost{paid: map[string]string{}, attempts: map[string]int{}, hang: make(chan struct{})}
	first := h.start(s)
	id := "remote-refund"
	s.start(id, workflows.RunInput{Goal: "refund order O-2", Planner: scripted("done",
		step(call("refund_remote", `{"order":"O-1"}`)),
		step(call("refund_remote", `{"order":"O-2"}`)))})

	s.decideWaiting(id, "gate:refund_remote", "c-1", false)
	s.decideWaiting(id, "gate:refund_remote", "c-2", true)
	// The first attempt of c-2 pays and hangs: stop its worker, and start another.
	key := ""
	deadline := time.Now().Add(waitTimeout)
	for key == "" && time.Now().Before(deadline) {
		h.mu.Lock()
		for k := range h.paid {
			key = k
		}
		h.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	if key == "" {
		t.Fatal("the approved refund never reached the worker that hosts it")
	}
	first.Stop()
	close(h.hang)
	second := h.start(s)
	defer second.Stop()

	res := s.result(id, 2*waitTimeout)
	checkEvents(t, "remote refund", res.Trace,
		event{"c-1", "refund_remote", "blocked"}, event{"c-1", "refund_remote", "rejected"},
		event{"c-2", "refund_remote", "blocked"}, event{"c-2", "refund_remote", "approved"}, event{"c-2", "refund_remote", "ok"})
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.paid) != 1 {
		t.Fatalf("paid %d times (%v), want once: the rejected call reached the worker, or the retry paid again", len(h.paid), h.paid)
	}
	if h.attempts[key] < 2 {
		t.Fatalf("%d attempts of the approved refund, want the hung one and a retry", h.attempts[key])
	}
	if want := s.key(id, "c-2"); key != want {
		t.Fatalf("the remote worker got idempotency key %q, want the call's %q", key, want)
	}
	var out struct {
		RefundID string `json:"refund_id"`
		Paid     bool   `json:"paid"`
	}
	for _, r := range res.Trace {
		if r.CallID == "c-2" && r.Status == workflows.TraceOK {
			if err := json.Unmarshal(r.Result, &out); err != nil {
				t.Fatalf("c-2's result %s: %v", r.Result, err)
			}
		}
	}
	if out.RefundID != "R-c-2" || !out.Paid {
		t.Fatalf("c-2's result is %+v, want the refund the remote worker made", out)
	}
}
