package e2e

import (
	"testing"

	"github.com/toolgate/toolgate/workflows"
)

// Stopping the embedded server (and the worker) while a run waits at the gate
// and starting it again on the same data directory keeps the run, its pending
// approval and its memo: the read made before the restart is answered from
// the memo after it.
func TestServerRestartMidRun(t *testing.T) {
	t.Parallel()
	testServerRestartMidRun(t, newStack(t))
}

// testServerRestartMidRun is TestServerRestartMidRun on s (SQLite or PostgreSQL).
func testServerRestartMidRun(t *testing.T, s *stack) {
	w := s.startWorker(false)

	const id = "server-restart"
	s.start(id, workflows.RunInput{
		Goal: "read TKT-1, book a stay, read TKT-1 again",
		Planner: scripted("booked",
			step(call("get_ticket", `{"ticket_id":"TKT-1"}`)),
			// book_hotel does not invalidate get_ticket (close_ticket would).
			step(call("book_hotel", `{"guest":"Restart Guest","hotel":"Hotel Aurora","nights":2}`)),
			step(call("get_ticket", `{"ticket_id":"TKT-1"}`)),
		),
	})
	s.awaitNext(id, waitTimeout, "gate:book_hotel")
	before := s.mustState(id)
	if before.Memo.Entries != 1 || len(before.Interrupts) != 1 {
		t.Fatalf("state before the restart %+v, want one memo entry and one interrupt", before)
	}
	oldAddress := s.server.Address()

	w.stop()
	s.stopServer()
	s.startServer()
	t.Logf("server restarted: %s -> %s", oldAddress, s.server.Address())
	s.startWorker(false)

	after := s.awaitStatus(id, workflows.StatusWaitingForApproval, 0, waitTimeout)
	if len(after.Interrupts) != 1 || after.Interrupts[0].CallID != "c-2" ||
		after.Interrupts[0].ArgsDigest != before.Interrupts[0].ArgsDigest || after.Memo != before.Memo {
		t.Fatalf("state after the restart %+v, want it as before: %+v", after, before)
	}

	dec, err := s.approveByUpdate(id, workflows.DecisionInput{CallID: "c-2", Approver: "carol", ArgsDigest: after.Interrupts[0].ArgsDigest})
	if err != nil || dec.Decision != workflows.TraceApproved {
		t.Fatalf("approve after the restart: %+v, %v", dec, err)
	}
	res := s.result(id, waitTimeout)
	if res.Status != workflows.StatusCompleted {
		t.Fatalf("result %+v, want completed", res)
	}
	checkEvents(t, "result trace", res.Trace,
		event{"c-1", "get_ticket", workflows.TraceOK},
		event{"c-2", "book_hotel", workflows.TraceBlocked},
		event{"c-2", "book_hotel", workflows.TraceApproved},
		event{"c-2", "book_hotel", workflows.TraceOK},
		event{"c-3", "get_ticket", workflows.TraceCacheHit}, // the memo survived the restart
	)

	var n int
	var guest, approvedBy string
	if err := s.openDB().QueryRow(s.sql(`SELECT COUNT(*), COALESCE(MAX(guest), ''), COALESCE(MAX(approved_by), '') FROM bookings WHERE idem_key = ?`), s.key(id, "c-2")).
		Scan(&n, &guest, &approvedBy); err != nil {
		t.Fatal(err)
	}
	if n != 1 || guest != "Restart Guest" || approvedBy != "carol" {
		t.Fatalf("bookings under %s/c-2: %d (guest %q, approved by %q), want one for Restart Guest approved by carol", id, n, guest, approvedBy)
	}
}
