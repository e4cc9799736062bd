package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/toolgate/toolgate/audit"
	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

var noReapply = []enumspb.ResetReapplyExcludeType{enumspb.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL, enumspb.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE}

// noteIn decodes the rewound note a history's signal carries.
func noteIn(t *testing.T, p *commonpb.Payloads) workflows.RewindNote {
	t.Helper()
	var n workflows.RewindNote
	if err := json.Unmarshal(p.GetPayloads()[0].GetData(), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// awaitRefused waits until run id's state lists a refused signal of name
// whose error holds want.
func (s *stack) awaitRefused(id, name, want string) {
	s.t.Helper()
	testenv.Eventually(s.t, waitTimeout, fmt.Sprintf("%s refusing %s: %s", id, name, want), func() error {
		st, err := s.state(id)
		if err != nil {
			return err
		}
		for _, r := range st.Refused {
			if r.Signal == name && strings.Contains(r.Error, want) {
				return nil
			}
		}
		return fmt.Errorf("refused: %+v", st.Refused)
	})
}

// rewindBy rewinds run id to just before call as operator who, signed.
func (s *stack) rewindBy(id, call string, k keyring, who string) tgclient.Rewound {
	s.t.Helper()
	p, err := s.tg.RewindPreview(rewindCtx(s.t), id, call)
	if err != nil {
		s.t.Fatal(err)
	}
	rw, err := s.tg.Rewind(rewindCtx(s.t), id, call, p.Digest, tgclient.Operator{Name: who, Key: k[who]})
	if err != nil {
		s.t.Fatal(err)
	}
	testenv.Eventually(s.t, waitTimeout, "the rewind noted", func() error {
		if got := records(s.mustTrace(id), call, workflows.TraceRewound); len(got) != 1 || got[0].Approver != who {
			return fmt.Errorf("rewound records %+v; refused %+v", got, s.mustState(id).Refused)
		}
		return nil
	})
	return rw
}

// After dave's rewind, whoever may reset workflows resets the same run to
// the same event again and sends dave's note (copied from the history) to
// the run that reset made: with a reason of their own, the run refuses it
// (it names another reset); with dave's reason copied, too (no worker
// recorded carrying that reset out, and his token was spent on his reset).
// Neither trace says "rewound by dave", and the audit
// of that run fails its reset as unattributed.
func TestARewindNoteCoversItsOneReset(t *testing.T) {
	t.Parallel()
	s, k := newTrust3Stack(t)
	const id = "trust3-note"
	s.start(id, workflows.RunInput{Goal: "close TKT-2", Planner: scripted("done", step(call("close_ticket", `{"ticket_id":"TKT-2"}`)))})
	s.awaitCalls(id, "c-1")
	s.signedDecide(id, k, "alice", true, "c-1")
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("before the rewind: %+v", res)
	}
	rw := s.rewindBy(id, "c-1", k, "dave")
	h := s.history(id, rw.RunID)
	note, reason := noteIn(t, rewindNoteOf(t, h)), resetEventOf(t, h).GetFailure().GetMessage()
	if note.Reset == "" || !strings.HasSuffix(reason, workflows.ResetMark(note.Reset)) {
		t.Fatalf("dave's reset's reason %q does not name its id %q", reason, note.Reset)
	}

	// A reset of one's own, with dave's note.
	own := s.reset(id, rw.Preview.BaseRunID, rw.Preview.ResetEvent, "mallory's reset", noReapply...)
	if err := s.client.SignalWorkflow(rewindCtx(t), id, own, workflows.SignalRewound, note); err != nil {
		t.Fatal(err)
	}
	s.awaitRefused(id, workflows.SignalRewound, "the reset that made this run is not the one the note names")

	// The same, dave's reason copied.
	copied := s.reset(id, rw.Preview.BaseRunID, rw.Preview.ResetEvent, reason, noReapply...)
	if err := s.client.SignalWorkflow(rewindCtx(t), id, copied, workflows.SignalRewound, note); err != nil {
		t.Fatal(err)
	}
	s.awaitRefused(id, workflows.SignalRewound, "no worker recorded carrying out the reset that made this run")
	s.awaitCalls(id, "c-1")
	s.signedDecide(id, k, "alice", true, "c-1")
	res := s.result(id, waitTimeout)
	if got := records(res.Trace, "c-1", workflows.TraceRewound); res.Status != workflows.StatusCompleted || len(got) != 0 {
		t.Fatalf("the copied reset's run: %s, rewound records %+v, want none", res.Status, got)
	}
	rep := s.audit(id, copied)
	var resets []audit.Entry
	for _, e := range rep.Failed() {
		if e.Kind == audit.KindReset {
			resets = append(resets, e)
		}
	}
	if len(resets) != 1 || !strings.Contains(resets[0].Problem, "unattributed reset") {
		t.Fatalf("the audit of the copied reset's run fails %+v, want its reset unattributed", rep.Failed())
	}
	for _, e := range rep.Entries {
		if e.Kind == audit.KindRewind && e.Applied {
			t.Fatalf("the audit says the run took dave's note: %+v", e)
		}
	}
}

// A fork keeps the verified requester of the run it forks: dave signed the
// run's start, erin forks it; in the fork neither may decide the refund
// (self-approval), bob may, and it pays once. The audit agrees.
func TestAForkKeepsItsSourcesRequester(t *testing.T) {
	t.Parallel()
	s, k := newTrust3Stack(t)
	const src, fork = "trust3-fork-source", "trust3-fork"
	in := workflows.RunInput{Goal: "refund BK-2", Planner: scripted("done", step(call("refund", `{"booking_id":"BK-2","amount_cents":2500}`)))}
	if err := tgclient.SignStart(&in, src, "dave", k["dave"], 0); err != nil {
		t.Fatal(err)
	}
	s.start(src, in)
	if st := s.awaitCalls(src, "c-1"); st.RequestedBy != "dave" {
		t.Fatalf("the source's requester: %q", st.RequestedBy)
	}
	if _, err := s.tg.Fork(rewindCtx(t), src, "c-1", fork, nil, tgclient.Operator{Name: "erin", Key: k["erin"]}); err != nil {
		t.Fatal(err)
	}
	st := s.awaitCalls(fork, "c-1")
	if st.RequestedBy != "dave" || !slices.Equal(st.ForkedBy, []string{"erin"}) {
		t.Fatalf("the fork: requested by %q, forked by %v; want dave, [erin]", st.RequestedBy, st.ForkedBy)
	}
	if msg := s.refusedDecision(fork, k, "dave", "c-1"); !strings.Contains(msg, "self-approval refused: dave requested this run") {
		t.Errorf("dave approving his own refund in the fork: %s", msg)
	}
	if msg := s.refusedDecision(fork, k, "erin", "c-1"); !strings.Contains(msg, "self-approval refused: erin forked this run") {
		t.Errorf("erin approving in her fork: %s", msg)
	}
	s.signedDecide(fork, k, "bob", true, "c-1")
	if res := s.result(fork, waitTimeout); res.Status != workflows.StatusCompleted || len(s.payments("BK-2")) != 1 {
		t.Fatalf("the fork: %s, payments %v", res.Status, s.payments("BK-2"))
	}
	rep := s.audit(fork, "")
	if len(rep.Failed()) > 0 || len(rep.Mismatches()) > 0 || len(rep.Executions) != 1 || !strings.Contains(rep.Executions[0].Basis, "approved by bob") {
		t.Fatalf("the fork's audit: failed %+v, mismatches %+v, executions %+v", rep.Failed(), rep.Mismatches(), rep.Executions)
	}
	s.signedDecide(src, k, "carol", false, "c-1")
}

// One operator floods a rewound run with 1,100 rewind notes, each with a
// fresh token: the run takes one note per reset, so nothing of the chain's
// is used up — bob's decision, carol's grant and another rewind all go on.
func TestNoSignerCrowdsOutAnother(t *testing.T) {
	t.Parallel()
	s, k := newTrust3Stack(t)
	const id = "trust3-flood"
	s.closeThenRefund(id, k, "TKT-3", "BK-3", 700)
	rw := s.rewindBy(id, "c-2", k, "dave")
	note := noteIn(t, rewindNoteOf(t, s.history(id, rw.RunID)))
	for i := range 1100 {
		n := note
		n.Preview = fmt.Sprintf("%064x", i+1)
		n.Token = k.sign(t, signed.Claims{Approver: "dave", WorkflowID: id, Action: signed.ActionRewind, CallID: n.CallID, Source: n.BaseRunID, Preview: n.Preview, Reset: n.Reset})
		if err := s.client.SignalWorkflow(rewindCtx(t), id, rw.RunID, workflows.SignalRewound, n); err != nil {
			t.Fatalf("note %d: %v", i, err)
		}
	}
	s.awaitRefused(id, workflows.SignalRewound, "this run has taken the note of the reset that made it already")
	s.awaitCalls(id, "c-2")
	grant := k.sign(t, signed.Claims{Approver: "carol", WorkflowID: id, Action: signed.ActionGrant, Grant: &signed.Grant{Tool: "refund", Uses: 1}})
	if err := s.sendToken(id, workflows.UpdateGrant, grant); err != nil {
		t.Fatalf("carol's grant after the flood: %v", err)
	}
	s.signedDecide(id, k, "bob", true, "c-2")
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted || len(s.payments("BK-3")) != 1 {
		t.Fatalf("after the flood: %s, payments %v", res.Status, s.payments("BK-3"))
	}
	if got := records(s.mustTrace(id), "c-2", workflows.TraceRewound); len(got) != 1 {
		t.Fatalf("rewound records %+v, want dave's one", got)
	}
	s.rewindBy(id, "c-2", k, "erin") // and another rewind still goes
}
