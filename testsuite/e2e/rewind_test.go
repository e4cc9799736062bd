package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/activities/desk"
	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// rewindCtx bounds one client call of the rewind suites (a preview replays
// the run's histories).
func rewindCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// awaitCalls waits until run id waits for exactly the calls want.
func (s *stack) awaitCalls(id string, want ...string) workflows.State {
	s.t.Helper()
	var st workflows.State
	testenv.Eventually(s.t, waitTimeout, fmt.Sprintf("%s waiting for %v", id, want), func() error {
		var err error
		if st, err = s.state(id); err != nil {
			return err
		}
		var got []string
		for _, it := range st.Interrupts {
			got = append(got, it.CallID)
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("status %s, waiting for %v", st.Status, got)
		}
		return nil
	})
	return st
}

func (s *stack) approveAll(id, who string, calls ...string) {
	s.t.Helper()
	outs, err := s.tg.Approve(rewindCtx(s.t), id, tgclient.As(who), calls...)
	if err == nil && tgclient.Refused(outs) > 0 {
		err = fmt.Errorf("%+v", outs)
	}
	if err != nil {
		s.t.Fatalf("approving %v of %s: %v", calls, id, err)
	}
}

func (s *stack) payments(booking string) []desk.Payment {
	s.t.Helper()
	d := s.openDesk()
	defer d.Close()
	pays, err := d.Payments(context.Background(), booking)
	if err != nil {
		s.t.Fatal(err)
	}
	return pays
}

// A run that closed a ticket and paid a refund in one step, rewound to
// before the refund: the preview names both as side effects that stay and
// both approvals as dropped; a stale digest is refused and changes nothing;
// after the rewind both calls wait at the gate again, and approved again
// with the same arguments the refund pays once in all.
func TestRewindBeforeTheRefund(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startWorker(false)
	const id = "rewind-refund"
	s.start(id, workflows.RunInput{Goal: "close TKT-1 and refund BK-1", Planner: scripted("done",
		step(call("close_ticket", `{"ticket_id":"TKT-1"}`), call("refund", `{"booking_id":"BK-1","amount_cents":500}`)))})
	// Approved by signal, as the stock temporal CLI does: a reset that
	// re-applied signals would approve the calls again by itself.
	for _, it := range s.awaitCalls(id, "c-1", "c-2").Interrupts {
		s.signal(id, workflows.SignalApprove, workflows.DecisionInput{CallID: it.CallID, Approver: "alice", ArgsDigest: it.ArgsDigest})
	}
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("before the rewind: %+v", res)
	}
	paid := s.payments("BK-1")
	if len(paid) != 1 {
		t.Fatalf("payments before the rewind: %+v", paid)
	}

	p, err := s.tg.RewindPreview(rewindCtx(t), id, "c-2")
	if err != nil {
		t.Fatal(err)
	}
	var kept, dropped []string
	for _, k := range p.Kept {
		kept = append(kept, k.ID+" "+k.Tool)
	}
	for _, d := range p.Dropped {
		dropped = append(dropped, d.ID+" "+d.Decision+" by "+d.Approver)
	}
	if !slices.Equal(kept, []string{"c-1 close_ticket", "c-2 refund"}) || !strings.Contains(string(p.Kept[1].Result), paid[0].ID) {
		t.Errorf("preview's side effects that stay: %v (%s), want the close and the refund %s", kept, fmt.Sprint(p.Kept), paid[0].ID)
	}
	if !slices.Equal(dropped, []string{"c-1 approved by alice", "c-2 approved by alice"}) {
		t.Errorf("preview's dropped decisions: %v", dropped)
	}
	if !slices.Equal(p.Redo, []string{"c-1", "c-2"}) || p.Step != 1 || len(p.Digest) != 64 {
		t.Errorf("preview: %+v", p)
	}

	before, err := s.client.DescribeWorkflowExecution(rewindCtx(t), id, "")
	if err != nil {
		t.Fatal(err)
	}
	stale := strings.Repeat("0", 64)
	if _, err := s.tg.Rewind(rewindCtx(t), id, "c-2", stale, tgclient.Operator{Name: "olga"}); !errors.Is(err, tgclient.ErrStale) ||
		!strings.Contains(err.Error(), "digest "+stale) || !strings.Contains(err.Error(), "digest "+p.Digest) {
		t.Fatalf("rewind with a stale digest: %v, want ErrStale naming both digests whole", err)
	}
	after, err := s.client.DescribeWorkflowExecution(rewindCtx(t), id, "")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := after.GetWorkflowExecutionInfo(), before.GetWorkflowExecutionInfo(); a.GetExecution().GetRunId() != b.GetExecution().GetRunId() || a.GetHistoryLength() != b.GetHistoryLength() {
		t.Fatalf("a refused rewind changed the run: %v -> %v", b.GetExecution(), a.GetExecution())
	}

	rw, err := s.tg.Rewind(rewindCtx(t), id, "c-2", p.Digest, tgclient.Operator{Name: "olga"})
	if err != nil {
		t.Fatal(err)
	}
	if rw.RunID == "" || rw.RunID == before.GetWorkflowExecutionInfo().GetExecution().GetRunId() {
		t.Fatalf("rewind: %+v", rw)
	}
	// No signal after the point came back: none was applied, none refused.
	if st := s.awaitCalls(id, "c-1", "c-2"); len(st.Refused) > 0 {
		t.Errorf("after the rewind the run got signals from before it: %+v", st.Refused)
	}
	s.approveAll(id, "bob", "c-1", "c-2")
	res := s.result(id, waitTimeout)
	if res.Status != workflows.StatusCompleted {
		t.Fatalf("after the rewind: %+v", res)
	}
	rewound := records(res.Trace, "c-2", workflows.TraceRewound)
	if len(rewound) != 1 || rewound[0].Approver != "olga" || !strings.Contains(rewound[0].Reason, p.Digest) {
		t.Errorf("the rewind in the trace: %+v", res.Trace)
	}
	if got := records(res.Trace, "c-2", workflows.TraceApproved); len(got) != 1 || got[0].Approver != "bob" {
		t.Errorf("c-2 approved after the rewind: %+v, want bob's approval only (alice's was dropped)", got)
	}
	var refund desk.RefundResult
	if ok := records(res.Trace, "c-2", workflows.TraceOK); len(ok) != 1 || json.Unmarshal(ok[0].Result, &refund) != nil || refund.PaymentID != paid[0].ID || !refund.Duplicate {
		t.Errorf("the refund after the rewind: %+v, want %s again, as a duplicate", ok, paid[0].ID)
	}
	if pays := s.payments("BK-1"); len(pays) != 1 {
		t.Fatalf("payments after the rewind: %+v, want the one payment", pays)
	}
	// The rewound run's history replays (steps replays it), and says so.
	tl, err := s.tg.Steps(rewindCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Steps) != 1 || len(tl.Steps[0].Calls) != 2 || tl.Runs[0].Version < 7 || tl.Steps[0].Calls[1].Approver != "bob" {
		t.Fatalf("steps after the rewind: %+v", tl)
	}
}

// A rewind to a call of an earlier run of the chain (the run continued as
// new since), with the worker — a process — killed -9 right after the
// reset and another started: the close comes back to the gate, the reads
// after it run again, the refund waits again, and approved again each acts
// once in all; the rewound history replays.
func TestRewindAcrossContinueAsNewWithTheWorkerKilled(t *testing.T) {
	longSuite(t)
	t.Parallel()
	s := newStack(t)
	a := s.startWorkerProc("worker A", nil)
	const id = "rewind-chain"
	s.start(id, workflows.RunInput{Goal: "close TKT-1, look around, refund BK-1", HistoryLimit: 12, Planner: scripted("done",
		step(call("search_tickets", `{"query":"charged twice"}`)),
		step(call("close_ticket", `{"ticket_id":"TKT-1"}`)),
		step(call("search_tickets", `{"query":"login"}`)),
		step(call("search_tickets", `{"query":"invoice"}`)),
		step(call("search_tickets", `{"query":"shipping"}`)),
		step(call("refund", `{"booking_id":"BK-1","amount_cents":500}`)))})
	s.awaitCalls(id, "c-2")
	s.approveAll(id, "alice", "c-2")
	s.awaitCalls(id, "c-6")
	s.approveAll(id, "alice", "c-6")
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("before the rewind: %+v", res)
	}
	steps, err := s.tg.Steps(rewindCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps.Runs) < 2 {
		t.Fatalf("the chain has %d runs, want the run to have continued as new", len(steps.Runs))
	}
	st, _, err := steps.Find("c-2")
	if err != nil {
		t.Fatal(err)
	}
	if st.RunID == steps.Runs[len(steps.Runs)-1].RunID {
		t.Fatalf("c-2's step is in the current run %s, want an earlier run of the chain", st.RunID)
	}
	p, err := s.tg.RewindPreview(rewindCtx(t), id, "c-2")
	if err != nil {
		t.Fatal(err)
	}
	var kept, reads []string
	for _, k := range p.Kept {
		kept = append(kept, k.ID)
	}
	for _, r := range p.Reads {
		reads = append(reads, r.ID)
	}
	if !slices.Equal(kept, []string{"c-2", "c-6"}) || !slices.Equal(reads, []string{"c-3", "c-4", "c-5"}) || p.BaseRunID != st.RunID {
		t.Fatalf("preview: kept %v, reads %v, base %s; want the close and the refund, the three reads after, run %s", kept, reads, p.BaseRunID, st.RunID)
	}
	if _, err := s.tg.Rewind(rewindCtx(t), id, "c-2", p.Digest, tgclient.Operator{Name: "olga"}); err != nil {
		t.Fatal(err)
	}
	a.kill()
	_ = a.wait(t, waitTimeout)
	s.startWorkerProc("worker B", nil)
	s.awaitCalls(id, "c-2")
	s.approveAll(id, "bob", "c-2")
	s.awaitCalls(id, "c-6")
	s.approveAll(id, "bob", "c-6")
	res := s.result(id, waitTimeout)
	if res.Status != workflows.StatusCompleted {
		t.Fatalf("after the rewind: %+v", res)
	}
	if pays := s.payments("BK-1"); len(pays) != 1 {
		t.Fatalf("payments: %+v, want one", pays)
	}
	if tk := s.ticket("TKT-1"); tk.Status != "closed" || tk.ClosedBy != s.key(id, "c-2") {
		t.Fatalf("TKT-1: %+v", tk)
	}
	after, err := s.tg.Steps(rewindCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range after.Steps {
		for _, c := range s.Calls {
			if c.Destructive && c.Approver != "bob" {
				t.Errorf("after the rewind %s is approved by %q, want bob (alice's approvals were dropped)", c.ID, c.Approver)
			}
		}
	}
}
