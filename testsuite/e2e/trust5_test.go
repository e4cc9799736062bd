package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// The trust boundary's fourth pass, 2 of 2 (issue 44), on `toolgate dev`'s
// server (authorization on): authority lives in the authority namespace,
// which only workers write. The attacker is a client of the runs with no
// credential (the person role): all it may do in the authority namespace
// is read.

// newTrust5Stack is an auth stack whose worker (a worker's credential)
// holds pol, and the attacker's client: no credential at all.
func newTrust5Stack(t *testing.T, pol *policy.Policy) (*stack, client.Client) {
	s, anonymous := newAuthStack(t)
	s.startWorkerWith(func(o *worker.Options) { o.Policy = pol })
	return s, anonymous
}

// markerOf is the workflow id a token's use is claimed under.
func markerOf(token string) string {
	sum := sha256.Sum256([]byte(token))
	return workflows.SpentMarkerPrefix + hex.EncodeToString(sum[:16])
}

// requireDenied fails unless err is the server's refusal of a person's
// write in the authority namespace.
func requireDenied(t *testing.T, what string, err error) {
	t.Helper()
	var denied *serviceerror.PermissionDenied
	if !errors.As(err, &denied) || !strings.Contains(err.Error(), "the authority namespace is written by workers only") {
		t.Fatalf("%s in the authority namespace: %v, want it refused (written by workers only)", what, err)
	}
}

// deleteIn is a DeleteWorkflowExecution of wid in ns, by c.
func deleteIn(c client.Client, ns, wid string) error {
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	_, err := c.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
		Namespace: ns, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: wid}})
	return err
}

// Item 2: deleting a spent marker revives no token. Bob's grant is taken;
// a rewind rolls the run back to before it; the attacker deletes the
// grant's marker wherever it may, and sends the grant again: it is refused
// as used, and no grant is back.
func TestDeletingASpentMarkerRevivesNoToken(t *testing.T) {
	t.Parallel()
	k := newKeyring(t, "alice", "bob", "carol", "dave", "erin")
	s, attacker := newTrust5Stack(t, trust3Policy(t, k))
	const id = "trust5-delete"
	s.closeThenRefund(id, k, "TKT-1", "BK-1", 2500)
	grant := k.sign(t, signed.Claims{Approver: "bob", WorkflowID: id, Action: signed.ActionGrant, Grant: &signed.Grant{Tool: "refund", Uses: 1}})
	if err := sendTokenAs(attacker, id, workflows.UpdateGrant, grant); err != nil {
		t.Fatalf("bob's grant: %v", err)
	}
	if st := s.mustState(id); len(st.Grants) != 1 {
		t.Fatalf("grants after bob's: %+v, want his", st.Grants)
	}
	p, err := s.tg.RewindPreview(rewindCtx(t), id, "c-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.tg.Rewind(rewindCtx(t), id, "c-1", p.Digest, tgclient.Operator{Name: "dave", Key: k["dave"]}); err != nil {
		t.Fatal(err)
	}
	s.awaitCalls(id, "c-1")

	marker := markerOf(grant)
	requireDenied(t, "deleting the grant's marker", deleteIn(attacker, s.authorityNamespace(), marker))
	var nf *serviceerror.NotFound
	if err := deleteIn(attacker, devserver.DefaultNamespace, marker); !errors.As(err, &nf) {
		t.Fatalf("the grant's marker in the runs' namespace: %v, want none there", err)
	}
	err = sendTokenAs(attacker, id, workflows.UpdateGrant, grant)
	if err == nil || !strings.Contains(err.Error(), "bob's token was used already") {
		t.Fatalf("bob's spent grant sent again after the rewind and the deletes: %v, want it refused as used", err)
	}
	if st := s.mustState(id); len(st.Grants) != 0 {
		t.Fatalf("grants after the rewind: %+v, want none", st.Grants)
	}
}

// Item 4: a squatted marker stops no honest use. The attacker, holding a
// copy of bob's grant before it is sent, starts its marker first wherever
// it may; the grant is then sent, and taken.
func TestASquattedMarkerStopsNoHonestUse(t *testing.T) {
	t.Parallel()
	k := newKeyring(t, "alice", "bob", "carol", "dave", "erin")
	s, attacker := newTrust5Stack(t, trust3Policy(t, k))
	const id = "trust5-squat"
	s.closeThenRefund(id, k, "TKT-2", "BK-2", 2500)
	grant := k.sign(t, signed.Claims{Approver: "bob", WorkflowID: id, Action: signed.ActionGrant, Grant: &signed.Grant{Tool: "refund", Uses: 1}})
	marker := markerOf(grant)
	opts := client.StartWorkflowOptions{ID: marker, TaskQueue: "attacker-queue"}
	if _, err := s.inAuthority(attacker).ExecuteWorkflow(rewindCtx(t), opts, workflows.StartMarkerWorkflow); err == nil {
		t.Fatal("the attacker started a marker in the authority namespace")
	} else {
		requireDenied(t, "starting the grant's marker", err)
	}
	if _, err := attacker.ExecuteWorkflow(rewindCtx(t), opts, workflows.StartMarkerWorkflow); err != nil {
		t.Fatalf("starting the marker in the runs' namespace, as a person may: %v", err)
	}
	if err := sendTokenAs(attacker, id, workflows.UpdateGrant, grant); err != nil {
		t.Fatalf("bob's grant, its marker squatted in the runs' namespace: %v, want it taken", err)
	}
	if st := s.mustState(id); len(st.Grants) != 1 {
		t.Fatalf("grants after bob's: %+v, want his", st.Grants)
	}
}

// sendTokenAs sends a grant or revoke update carrying token with c.
func sendTokenAs(c client.Client, id, update, token string) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: update,
		Args: []any{workflows.TokenInput{Token: token}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	return err
}

// trust5GuardsPolicy: refunds of at most 50.00 run by rule, under a fleet
// budget of 60.00 an hour; dave is an operator.
func trust5GuardsPolicy(t *testing.T, k keyring) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(fmt.Sprintf(`approvers:
  alice: {key: %q, roles: [support]}
  dave:  {key: %q, roles: [ops]}
operators: [ops]
tools:
  close_ticket: {approvers: {roles: [support]}}
  refund:
    rules:
      - {id: small-refunds, when: "args.amount_cents <= 5000", decide: allow}
guards:
  - {id: refund-budget, kind: budget, tools: [refund], amount: "args.amount_cents", limit: 6000, window: 1h}
`, k.pub("alice"), k.pub("dave"))))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// refundRun starts run id: refund booking cents, then close ticket (which
// waits for a human), and returns once the refund has run or been refused
// and the close waits.
func (s *stack) refundRun(id, booking, ticket string, cents int) {
	s.t.Helper()
	s.start(id, workflows.RunInput{Goal: "refund " + booking, Planner: scripted("done",
		step(call("refund", fmt.Sprintf(`{"booking_id":%q,"amount_cents":%d}`, booking, cents))),
		step(call("close_ticket", fmt.Sprintf(`{"ticket_id":%q}`, ticket))))})
	s.awaitCalls(id, "c-2")
}

// Items 5, 6 and 7: the fleet ledger lives where no client of the runs can
// terminate, squat or signal it. A call that ran is committed when it ran;
// the attacker's terminate, start and forged release of the ledger are
// refused; a ledger someone with the right terminates anyway is started
// anew from its last state, its pause and budget held, never empty.
func TestTheLedgerCannotBeWipedSquattedOrReleased(t *testing.T) {
	t.Parallel()
	k := newKeyring(t, "alice", "dave")
	s, attacker := newTrust5Stack(t, trust5GuardsPolicy(t, k))
	lid := ledger.ID(workflows.TaskQueue)                          // the pauses
	budget := ledger.ShardID(workflows.TaskQueue, "refund-budget") // the guard's counts

	// A refund of 40.00 runs; while its run waits on the close, the ledger
	// holds it committed already (not reserved: nothing a release frees).
	s.refundRun("trust5-ledger-1", "BK-1", "TKT-1", 4000)
	if n := len(s.payments("BK-1")); n != 1 {
		t.Fatalf("payments of BK-1: %d, want 1", n)
	}
	committed := func(want int64) {
		t.Helper()
		testenv.Eventually(t, waitTimeout, "the ledger's count", func() error {
			v, ok, err := s.tg.Guards(rewindCtx(t), workflows.TaskQueue)
			if err != nil || !ok {
				return fmt.Errorf("guards: %v (started %v)", err, ok)
			}
			if len(v.Guards) != 1 || len(v.Guards[0].Scopes) != 1 {
				return fmt.Errorf("guards %+v, want one guard counting one scope", v.Guards)
			}
			if sc := v.Guards[0].Scopes[0]; sc.Committed != want || sc.Reserved != 0 {
				return fmt.Errorf("%s %s: %d committed, %d reserved; want %d committed", v.Guards[0].ID, sc.Scope, sc.Committed, sc.Reserved, want)
			}
			return nil
		})
	}
	committed(4000)

	// The attacker, with no credential: every write of the ledger refused.
	ac := s.inAuthority(attacker)
	_, err := ac.WorkflowService().TerminateWorkflowExecution(rewindCtx(t), &workflowservice.TerminateWorkflowExecutionRequest{
		Namespace: s.authorityNamespace(), WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: lid}, Reason: "wipe the budgets"})
	requireDenied(t, "terminating the ledger", err)
	_, err = ac.WorkflowService().TerminateWorkflowExecution(rewindCtx(t), &workflowservice.TerminateWorkflowExecutionRequest{
		Namespace: s.authorityNamespace(), WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: budget}, Reason: "wipe the budget"})
	requireDenied(t, "terminating the guard's ledger", err)
	requireDenied(t, "a forged release", ac.SignalWorkflow(rewindCtx(t), lid, "", ledger.SignalSettle, ledger.Settlement{Key: "any"}))
	requireDenied(t, "a forged release to the guard's ledger", ac.SignalWorkflow(rewindCtx(t), budget, "", ledger.SignalSettle, ledger.Settlement{Key: "any"}))
	requireDenied(t, "deleting the ledger", deleteIn(attacker, s.authorityNamespace(), lid))
	requireDenied(t, "deleting the guard's ledger", deleteIn(attacker, s.authorityNamespace(), budget))
	// Squatting the ledger's id in the runs' namespace, on a queue of its
	// own, changes nothing: no run asks it.
	if _, err := attacker.ExecuteWorkflow(rewindCtx(t), client.StartWorkflowOptions{ID: lid, TaskQueue: "attacker-queue"}, ledger.WorkflowName, ledger.Input{}); err != nil {
		t.Fatalf("starting a ledger in the runs' namespace, as a person may: %v", err)
	}

	// The budget holds: 40.00 + 30.00 is over 60.00.
	s.refundRun("trust5-ledger-2", "BK-2", "TKT-2", 3000)
	if n := len(s.payments("BK-2")); n != 0 {
		t.Fatalf("payments of BK-2: %d, want none (over the budget)", n)
	}

	// dave pauses every destructive tool, through a worker (the person has
	// no right to write the ledger itself).
	v, err := s.tg.Pause(rewindCtx(t), workflows.TaskQueue, ledger.AllTools, "incident 7", "dave", k["dave"])
	if err != nil || len(v.Pauses) != 1 {
		t.Fatalf("dave's pause: %v (%+v)", err, v.Pauses)
	}

	// Someone with the right (a worker's credential) terminates the ledgers:
	// the next reservation starts them anew, from the terminated runs' state.
	wa := s.inAuthority(s.client)
	for _, id := range []string{lid, budget} {
		if err := wa.TerminateWorkflow(rewindCtx(t), id, "", "an admin's mistake"); err != nil {
			t.Fatal(err)
		}
	}
	// Every destructive tool is paused, the close too: the run ends.
	s.start("trust5-ledger-3", workflows.RunInput{Goal: "refund BK-3", Planner: scripted("done",
		step(call("refund", `{"booking_id":"BK-3","amount_cents":100}`)), step(call("close_ticket", `{"ticket_id":"TKT-3"}`)))})
	if res := s.result("trust5-ledger-3", waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("the paused run: %+v", res)
	}
	if n := len(s.payments("BK-3")); n != 0 {
		t.Fatalf("payments of BK-3: %d, want none: the pause holds across the ledger's termination", n)
	}
	v, ok, err := s.tg.Guards(rewindCtx(t), workflows.TaskQueue)
	if err != nil || !ok || len(v.Pauses) != 1 || v.Pauses[0].By != "dave" {
		t.Fatalf("the ledger after its termination: %v (%+v), want dave's pause", err, v.Pauses)
	}
	committed(4000)
}

// An operator's act is confirmed by the ledger, not by whoever answered it:
// on a server where anyone may poll a queue, a rogue worker answers the
// act's workflow with a pause it never made; the client reads the ledger,
// finds no pause, and says so.
func TestAPauseAnsweredByARogueWorkerIsNotTakenForDone(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	k := newKeyring(t, "dave")
	const queue = "trust5-rogue-acts"
	rogue := sdkworker.New(s.client, queue, sdkworker.Options{})
	rogue.RegisterWorkflowWithOptions(func(workflow.Context, ledger.Act) (ledger.View, error) {
		return ledger.View{Policy: true, Pauses: []ledger.Pause{{Tool: "refund", By: "dave", Reason: "fake"}}}, nil
	}, workflow.RegisterOptions{Name: ledger.ActWorkflow})
	if err := rogue.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rogue.Stop)
	_, err := s.tg.Pause(rewindCtx(t), queue, "refund", "incident", "dave", k["dave"])
	if err == nil || !strings.Contains(err.Error(), "does not show it") {
		t.Fatalf("a pause only a rogue worker answered: %v, want it reported as not held by the ledger", err)
	}
}
