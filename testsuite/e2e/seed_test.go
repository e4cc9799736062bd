package e2e

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/workflows"
)

// The seed's walk-through, driven only through the Temporal client API, as any
// other program (or the stock temporal CLI) would drive it: a search, the same
// search again (answered by the memo), and a destructive close that waits at
// the gate until a plain JSON signal approves it.
func TestSeedWalkThroughThroughTheClientAPI(t *testing.T) {
	t.Parallel()
	testSeedWalkThroughThroughTheClientAPI(t, newStack(t))
}

// testSeedWalkThroughThroughTheClientAPI is TestSeedWalkThroughThroughTheClientAPI on s (SQLite or PostgreSQL).
func testSeedWalkThroughThroughTheClientAPI(t *testing.T, s *stack) {
	s.startWorker(false)
	d := s.openDesk()

	const id = "seed-walk-through"
	s.start(id, workflows.RunInput{
		Goal: "find the login ticket and close it",
		Planner: scripted("closed the login ticket",
			step(call("search_tickets", `{"query":"login"}`)),
			step(call("search_tickets", `{"query": "login"}`)), // same call, other spelling
			step(call("close_ticket", `{"ticket_id":"TKT-3"}`)),
		),
	})

	s.awaitNext(id, waitTimeout, "gate:close_ticket")
	st := s.mustState(id)
	if st.Status != workflows.StatusWaitingForApproval {
		t.Fatalf("status %q, want %q", st.Status, workflows.StatusWaitingForApproval)
	}
	if len(st.Interrupts) != 1 {
		t.Fatalf("interrupts %+v, want exactly one", st.Interrupts)
	}
	it := st.Interrupts[0]
	if it.CallID != "c-3" || it.Tool != "close_ticket" || string(it.CallArgs) != `{"ticket_id":"TKT-3"}` || it.ArgsDigest == "" {
		t.Fatalf("interrupt %+v (call_args %s), want c-3 close_ticket {\"ticket_id\":\"TKT-3\"} with an args_digest", it, it.CallArgs)
	}
	checkEvents(t, "trace while waiting", s.mustTrace(id),
		event{"c-1", "search_tickets", workflows.TraceOK},
		event{"c-2", "search_tickets", workflows.TraceCacheHit},
		event{"c-3", "close_ticket", workflows.TraceBlocked},
	)
	// Default deny: nothing was written while the call waits.
	if tk, err := d.Ticket(context.Background(), "TKT-3"); err != nil || tk.Status != "open" {
		t.Fatalf("TKT-3 before the approval: %+v, %v; want open", tk, err)
	}

	// Exactly what `temporal workflow signal --name approve --input '{"call_id":"c-3","approver":"alice","args_digest":"…"}'`
	// sends, with the digest read from the state query as docs/operating.md shows.
	s.signal(id, workflows.SignalApprove, json.RawMessage(`{"call_id":"c-3","approver":"alice","args_digest":"`+it.ArgsDigest+`"}`))

	res := s.result(id, waitTimeout)
	if res.Status != workflows.StatusCompleted || res.Answer != "closed the login ticket" {
		t.Fatalf("result status %q answer %q error %q, want completed with the answer", res.Status, res.Answer, res.Error)
	}
	checkEvents(t, "result trace", res.Trace,
		event{"c-1", "search_tickets", workflows.TraceOK},
		event{"c-2", "search_tickets", workflows.TraceCacheHit},
		event{"c-3", "close_ticket", workflows.TraceBlocked},
		event{"c-3", "close_ticket", workflows.TraceApproved},
		event{"c-3", "close_ticket", workflows.TraceOK},
	)
	if a := records(res.Trace, "c-3", workflows.TraceApproved)[0]; a.Approver != "alice" {
		t.Errorf("approved record %+v, want approver alice", a)
	}
	ok := records(res.Trace, "c-3", workflows.TraceOK)[0]
	var closed struct {
		Status        string `json:"status"`
		AlreadyClosed bool   `json:"already_closed"`
	}
	if err := json.Unmarshal(ok.Result, &closed); err != nil || closed.Status != "closed" || closed.AlreadyClosed {
		t.Errorf("close_ticket result %s (%v), want closed by this call", ok.Result, err)
	}

	tk, err := d.Ticket(context.Background(), "TKT-3")
	if err != nil {
		t.Fatal(err)
	}
	if key := s.key(id, "c-3"); tk.Status != "closed" || tk.ClosedBy != key || tk.ApprovedBy != "alice" {
		t.Fatalf("TKT-3 %+v, want closed by %s, approved by alice", tk, key)
	}
	var closedCount int
	if err := s.openDB().QueryRow(`SELECT COUNT(*) FROM tickets WHERE status = 'closed'`).Scan(&closedCount); err != nil {
		t.Fatal(err)
	}
	if closedCount != 1 {
		t.Fatalf("%d tickets closed, want exactly 1 (TKT-3)", closedCount)
	}
}
