package e2e

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/toolgate/toolgate/audit"
	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// The trust boundary's third pass (issue 33) on the real server: what a run
// chain has spent, and who may decide, survives any reset, and is proven by
// something an attacker on one host does not hold.

// keyring holds an Ed25519 key per approver, made for the test.
type keyring map[string]ed25519.PrivateKey

func newKeyring(t *testing.T, names ...string) keyring {
	t.Helper()
	k := keyring{}
	for _, n := range names {
		_, priv, err := signed.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		k[n] = priv
	}
	return k
}

// pub is name's public key as a policy file gives it.
func (k keyring) pub(name string) string {
	return signed.FormatPublicKey(k[name].Public().(ed25519.PublicKey))
}

// sign signs c as its approver (c.Approver's key), valid for ten minutes.
func (k keyring) sign(t *testing.T, c signed.Claims) string {
	t.Helper()
	now := time.Now()
	c.IssuedAt, c.Expiry = now.Unix(), now.Add(10*time.Minute).Unix()
	tok, err := signed.Sign(k[c.Approver], c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// trust3Policy: alice closes tickets (support), bob and carol approve
// refunds (finance), dave and erin are operators (erin in finance too).
func trust3Policy(t *testing.T, k keyring) *policy.Policy { return trust3PolicyWith(t, k, "") }

// trust3PolicyWith is trust3Policy with extra YAML after it (guards, say).
func trust3PolicyWith(t *testing.T, k keyring, extra string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(fmt.Sprintf(`approvers:
  alice: {key: %q, roles: [support]}
  bob:   {key: %q, roles: [finance]}
  carol: {key: %q, roles: [finance]}
  dave:  {key: %q, roles: [ops, finance]}
  erin:  {key: %q, roles: [ops, finance]}
operators: [ops]
tools:
  close_ticket: {approvers: {roles: [support]}}
  refund: {approvers: {roles: [finance]}}
`, k.pub("alice"), k.pub("bob"), k.pub("carol"), k.pub("dave"), k.pub("erin")) + extra))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newTrust3Stack is a stack whose worker holds trust3Policy, and its keys.
func newTrust3Stack(t *testing.T) (*stack, keyring) {
	s := newStack(t)
	k := newKeyring(t, "alice", "bob", "carol", "dave", "erin")
	s.startWorkerWith(func(o *worker.Options) { o.Policy = trust3Policy(t, k) })
	return s, k
}

// closeThenRefund starts run id: close ticket, then refund booking cents;
// alice approves the close, and it returns once the refund (c-2) waits.
func (s *stack) closeThenRefund(id string, k keyring, ticket, booking string, cents int) {
	s.t.Helper()
	s.start(id, workflows.RunInput{Goal: "close " + ticket + ", refund " + booking, Planner: scripted("done",
		step(call("close_ticket", fmt.Sprintf(`{"ticket_id":%q}`, ticket))), step(call("refund", fmt.Sprintf(`{"booking_id":%q,"amount_cents":%d}`, booking, cents))))})
	s.awaitCalls(id, "c-1")
	s.signedDecide(id, k, "alice", true, "c-1")
	s.awaitCalls(id, "c-2")
}

// sendToken sends a grant or revoke update carrying token, as any client
// holding the token could.
func (s *stack) sendToken(id, update, token string) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	h, err := s.client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: update,
		Args: []any{workflows.TokenInput{Token: token}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	return err
}

// signedDecide sends who's signed decision on call, and fails the test if the run refuses it.
func (s *stack) signedDecide(id string, k keyring, who string, approve bool, call string) {
	s.t.Helper()
	d := tgclient.Decider{Approver: who, Key: k[who], Text: "by " + who}
	var outs []tgclient.Outcome
	var err error
	if approve {
		outs, err = s.tg.Approve(rewindCtx(s.t), id, d, call)
	} else {
		outs, err = s.tg.Reject(rewindCtx(s.t), id, d, call)
	}
	if err == nil && tgclient.Refused(outs) > 0 {
		err = fmt.Errorf("%v", outs)
	}
	if err != nil {
		s.t.Fatalf("%s deciding %s of %s: %v", who, call, id, err)
	}
}

// refusedDecision sends who's signed approval of call and returns why the run refused it.
func (s *stack) refusedDecision(id string, k keyring, who, call string) string {
	s.t.Helper()
	outs, err := s.tg.Approve(rewindCtx(s.t), id, tgclient.Decider{Approver: who, Key: k[who]}, call)
	switch {
	case err != nil:
		return err.Error()
	case len(outs) != 1 || outs[0].Err == nil:
		s.t.Fatalf("%s's approval of %s in %s was taken: %+v", who, call, id, outs)
	}
	return outs[0].Err.Error()
}

// history is the history of run runID of id ("": the current run).
func (s *stack) history(id, runID string) *historypb.History {
	s.t.Helper()
	h := &historypb.History{}
	it := s.client.GetWorkflowHistory(rewindCtx(s.t), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			s.t.Fatal(err)
		}
		h.Events = append(h.Events, ev)
	}
	return h
}

// audit audits the history of run runID of id against the policy it recorded.
func (s *stack) audit(id, runID string) audit.Report {
	s.t.Helper()
	b, err := protojson.Marshal(s.history(id, runID))
	if err != nil {
		s.t.Fatal(err)
	}
	rep, err := audit.History(bytes.NewReader(b), nil)
	if err != nil {
		s.t.Fatalf("auditing %s: %v", id, err)
	}
	return rep
}

// rewindNoteOf is the rewound note a run's history holds.
func rewindNoteOf(t *testing.T, h *historypb.History) *commonpb.Payloads {
	t.Helper()
	for _, ev := range h.GetEvents() {
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == workflows.SignalRewound {
			return a.GetInput()
		}
	}
	t.Fatal("no rewound signal in the history")
	return nil
}

// resetEventOf is the reset that made the run whose history h is.
func resetEventOf(t *testing.T, h *historypb.History) *historypb.WorkflowTaskFailedEventAttributes {
	t.Helper()
	for _, ev := range h.GetEvents() {
		if a := ev.GetWorkflowTaskFailedEventAttributes(); a != nil && a.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW {
			return a
		}
	}
	t.Fatal("no reset in the history")
	return nil
}

// reset resets run base of id as anyone with reset rights can (the stock
// CLI's workflow reset): to event, with reason, re-applying reapply.
func (s *stack) reset(id, base string, event int64, reason string, exclude ...enumspb.ResetReapplyExcludeType) string {
	s.t.Helper()
	resp, err := s.client.ResetWorkflowExecution(rewindCtx(s.t), &workflowservice.ResetWorkflowExecutionRequest{
		Namespace: "default", WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: base},
		Reason: reason, WorkflowTaskFinishEventId: event, RequestId: fmt.Sprintf("attacker-%d", time.Now().UnixNano()), ResetReapplyExcludeTypes: exclude})
	if err != nil {
		s.t.Fatalf("resetting %s: %v", id, err)
	}
	return resp.GetRunId()
}

// An operator's rewind rolls a run's state back; the grant bob made and
// spent before it is not given back by sending his token again, toolgate's
// rewind or the stock CLI's reset (re-applying what came after the point),
// and c-2 never pays by a grant.
func TestARewindRevivesNoSpentToken(t *testing.T) {
	t.Parallel()
	s, k := newTrust3Stack(t)
	const id = "trust3-grant"
	s.closeThenRefund(id, k, "TKT-1", "BK-1", 2500)
	grant := k.sign(t, signed.Claims{Approver: "bob", WorkflowID: id, Action: signed.ActionGrant, Grant: &signed.Grant{Tool: "refund", Uses: 1}})
	if err := s.sendToken(id, workflows.UpdateGrant, grant); err != nil {
		t.Fatalf("bob's grant: %v", err)
	}
	revoke := k.sign(t, signed.Claims{Approver: "bob", WorkflowID: id, Action: signed.ActionRevoke, GrantID: "g-1"})
	if err := s.sendToken(id, workflows.UpdateRevoke, revoke); err != nil {
		t.Fatalf("bob's revoke: %v", err)
	}
	s.signedDecide(id, k, "carol", false, "c-2")
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted || len(s.payments("BK-1")) != 0 {
		t.Fatalf("before the rewind: %s, payments %v", res.Status, s.payments("BK-1"))
	}

	p, err := s.tg.RewindPreview(rewindCtx(t), id, "c-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.tg.Rewind(rewindCtx(t), id, "c-1", p.Digest, tgclient.Operator{Name: "dave", Key: k["dave"]}); err != nil {
		t.Fatal(err)
	}
	s.awaitCalls(id, "c-1")
	// Bob's grant, copied from the old history, sent again.
	err = s.sendToken(id, workflows.UpdateGrant, grant)
	if err == nil || !strings.Contains(err.Error(), "bob's token was used already: its use is recorded on the server") {
		t.Fatalf("bob's spent grant sent again after the rewind: %v, want it refused as used", err)
	}
	if st := s.mustState(id); len(st.Grants) != 0 {
		t.Fatalf("grants after the rewind: %+v, want none", st.Grants)
	}
	s.signedDecide(id, k, "alice", true, "c-1")
	s.awaitCalls(id, "c-2") // no grant answers it: it waits
	for _, r := range s.mustTrace(id) {
		if strings.HasPrefix(r.Approver, "grant:") {
			t.Fatalf("a grant decided after the rewind: %+v", r)
		}
	}

	// The stock CLI's reset of the same run to the same point, re-applying
	// the signals and updates after it: every token among them is spent.
	desc, err := s.client.DescribeWorkflowExecution(rewindCtx(t), id, "")
	if err != nil {
		t.Fatal(err)
	}
	run := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	s.reset(id, run, p.ResetEvent, "an operator's reset with reapply")
	testenv.Eventually(t, waitTimeout, "the reset run took up its history", func() error {
		st, err := s.state(id)
		if err != nil {
			return err
		}
		if len(st.Grants) != 0 {
			return errors.New("a grant is back: " + fmt.Sprint(st.Grants))
		}
		if len(st.Interrupts) != 1 || st.Interrupts[0].CallID != "c-1" {
			return fmt.Errorf("waiting for %+v, want c-1", st.Interrupts)
		}
		// dave's note, re-applied, is refused: it names toolgate's reset, not this one.
		if len(st.Refused) != 1 || st.Refused[0].Signal != workflows.SignalRewound || !strings.Contains(st.Refused[0].Error, "the note names a reset of run") {
			return fmt.Errorf("refused %+v, want dave's re-applied rewind note", st.Refused)
		}
		return nil
	})
	if got := records(s.mustTrace(id), "c-1", workflows.TraceRewound); len(got) != 0 {
		t.Fatalf("the stock reset took dave's rewind note: %+v", got)
	}
	s.signedDecide(id, k, "alice", true, "c-1")
	s.awaitCalls(id, "c-2")
	s.signedDecide(id, k, "carol", false, "c-2")
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("after the resets: %+v", res)
	}
	if pays := s.payments("BK-1"); len(pays) != 0 {
		t.Fatalf("payments of BK-1: %+v, want none: every refund was rejected", pays)
	}
}

// An approver named as the run names a rule or a grant ("rule:…",
// "grant:…") is refused, through any door: here the stock client's update
// and signal, on a worker without a policy; a plain name still decides.
func TestAnApproverNamedAsTheRunsOwnIsRefused(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startWorker(false)
	const id = "trust3-reserved"
	it := startWaiting(s, id)
	for _, name := range []string{"rule:small-refunds", "Grant:carol"} {
		_, err := s.approveByUpdate(id, workflows.DecisionInput{CallID: it.CallID, ArgsDigest: it.ArgsDigest, Approver: name})
		if err == nil || !strings.Contains(err.Error(), "are the run's own") {
			t.Errorf("approver %q by update: %v, want it refused", name, err)
		}
	}
	s.signal(id, workflows.SignalApprove, workflows.DecisionInput{CallID: it.CallID, ArgsDigest: it.ArgsDigest, Approver: "grant:bob"})
	s.awaitRefused(id, workflows.SignalApprove, `approver "grant:bob" refused`)
	if _, err := s.approveByUpdate(id, workflows.DecisionInput{CallID: it.CallID, ArgsDigest: it.ArgsDigest, Approver: "alice"}); err != nil {
		t.Fatal(err)
	}
	if got := records(s.result(id, waitTimeout).Trace, it.CallID, workflows.TraceApproved); len(got) != 1 || got[0].Approver != "alice" {
		t.Fatalf("approvals %+v, want alice's", got)
	}
}
