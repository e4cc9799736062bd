package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/demo"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// The trust boundary's second pass (issue 20) on the real server, for what a
// client can do with a start: a cron schedule or a workflow retry policy
// hands the next run its predecessor's input, and with it a client-written
// carry; a run that waits is flooded with refused signals of 1.9 MB.
func TestTrustSecondPassStarts(t *testing.T) {
	longSuite(t)
	s := newStack(t)
	s.startWorker(false) // no --allow-auto-approve
	d := s.openDesk()
	ticketOpen := func(t *testing.T, id string) {
		t.Helper()
		if tk, err := d.Ticket(context.Background(), id); err != nil || tk.Status != "open" {
			t.Fatalf("%s: %+v, %v; want it still open", id, tk, err)
		}
	}
	forged := json.RawMessage(`{"goal":"x","approval":"always_approve",
	  "planner":{"kind":"scripted","turns":[[{"tool":"close_ticket","args":{"ticket_id":"TKT-5"}}]],"answer":"done"},
	  "carry":{"config":{"tools":[{"name":"close_ticket"}],"allow_auto_approve":true},"turn":1,"transcript":[{"role":"user","text":"x"}]}}`)

	t.Run("a cron schedule is refused, every time", func(t *testing.T) {
		const id = "trust2-cron"
		ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
		defer cancel()
		if _, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue, CronSchedule: "@every 2s"},
			workflows.WorkflowName, forged); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.client.TerminateWorkflow(context.Background(), id, "", "test over") }()
		// Each cron run gets the same input; each is refused before anything runs.
		var failed []error
		testenv.Eventually(t, 2*waitTimeout, "two cron runs ended", func() error {
			failed = closedRunErrors(t, s, id)
			if len(failed) < 2 {
				return fmt.Errorf("%d cron runs ended", len(failed))
			}
			return nil
		})
		for _, err := range failed {
			requireInvalidInput(t, err, `cron schedule "@every 2s" refused`)
		}
		ticketOpen(t, "TKT-5")
	})

	t.Run("a retried run gets no carry", func(t *testing.T) {
		// The first run times out before any worker polls its queue; the
		// retry gets the same input, carry and all, "continued" from it.
		const id, queue = "trust2-retry", "trust2-retry"
		ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
		defer cancel()
		first, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue, WorkflowRunTimeout: 3 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: 3 * time.Second, MaximumAttempts: 2}}, workflows.WorkflowName, forged)
		if err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, waitTimeout, "the retry started", func() error {
			desc, err := s.client.DescribeWorkflowExecution(ctx, id, "")
			if err != nil {
				return err
			}
			if desc.GetWorkflowExecutionInfo().GetExecution().GetRunId() == first.GetRunID() {
				return fmt.Errorf("still the first run")
			}
			return nil
		})
		opts, dk, err := demo.OptionsWithDesk(s.dataDir, s.deskDB)
		if err != nil {
			t.Fatal(err)
		}
		defer dk.Close()
		w, err := worker.Start(s.client, queue, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		err = s.client.GetWorkflow(ctx, id, "").Get(ctx, nil)
		requireInvalidInput(t, err, fmt.Sprintf("carry refused: run %s, which this run follows, closed TimedOut, not ContinuedAsNew", first.GetRunID()))
		ticketOpen(t, "TKT-5")
	})

	t.Run("refused signals of 1.9 MB do not end a waiting run", func(t *testing.T) {
		// 40 refused approvals of 1.9 MB each, each sent once the run has
		// taken the one before: 76 MB, past the 50 MB a run's history may
		// hold. The run continues as new while it waits, its call waiting on
		// the same question, and the call closes once.
		const id = "trust2-flood"
		s.start(id, workflows.RunInput{Goal: "close it", Planner: scripted("closed", step(call("close_ticket", `{"ticket_id":"TKT-4"}`)))})
		before := s.awaitStatus(id, workflows.StatusWaitingForApproval, 0, waitTimeout).Interrupts[0]
		note := strings.Repeat("n", 1_900_000)
		var st workflows.State
		for i := range 40 {
			in := workflows.DecisionInput{CallID: "c-9", Approver: "x", Note: note, ArgsDigest: fmt.Sprint(i)}
			raw, _ := json.Marshal(in)
			sum := sha256.Sum256(raw)
			s.signal(id, workflows.SignalApprove, in)
			testenv.Eventually(t, waitTimeout, fmt.Sprintf("signal %d refused", i), func() error {
				var err error
				if st, err = s.state(id); err != nil {
					return err
				}
				if n := len(st.Refused); n == 0 || st.Refused[n-1].PayloadSHA256 != hex.EncodeToString(sum[:]) {
					return fmt.Errorf("not yet")
				}
				return nil
			})
		}
		if runs := countRuns(t, s, id); runs < 10 {
			t.Errorf("%d runs: want the waiting run to have continued as new as the signals came", runs)
		}
		if st.Status != workflows.StatusWaitingForApproval || len(st.Interrupts) != 1 {
			t.Fatalf("state %s, %+v: want still waiting on c-1", st.Status, st.Interrupts)
		}
		after := st.Interrupts[0]
		if after.CallID != before.CallID || after.ArgsDigest != before.ArgsDigest || !after.RequestedAt.Equal(before.RequestedAt) || !after.ExpiresAt.Equal(before.ExpiresAt) {
			t.Errorf("waits on %+v, want the same question as before the flood, %+v", after, before)
		}
		if _, err := s.approveByUpdate(id, workflows.DecisionInput{CallID: "c-1", Approver: "alice", ArgsDigest: after.ArgsDigest}); err != nil {
			t.Fatal(err)
		}
		res := s.result(id, waitTimeout)
		if res.Status != workflows.StatusCompleted {
			t.Fatalf("%s (%s), want completed", res.Status, res.Error)
		}
		checkEvents(t, "result", res.Trace[len(res.Trace)-2:], event{"c-1", "close_ticket", workflows.TraceApproved}, event{"c-1", "close_ticket", workflows.TraceOK})
		if tk, err := d.Ticket(context.Background(), "TKT-4"); err != nil || tk.Status != "closed" {
			t.Fatalf("TKT-4: %+v, %v; want closed", tk, err)
		}
	})
}

// closedRunErrors is the failure each run of workflow id that ended before
// another began ended with: Temporal hands it to the next cron (or retry)
// run, in that run's WorkflowExecutionStarted event (continued_failure).
func closedRunErrors(t *testing.T, s *stack, id string) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	var out []error
	for _, e := range runsOf(t, s, id) {
		first, err := s.client.GetWorkflowHistory(ctx, id, e.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT).Next()
		if err != nil {
			t.Fatal(err)
		}
		if f := first.GetWorkflowExecutionStartedEventAttributes().GetContinuedFailure(); f != nil {
			out = append(out, temporal.GetDefaultFailureConverter().FailureToError(f))
		}
	}
	return out
}

// goodwillYAML is the policy with a rule that cannot be evaluated on
// a refund without a reason ahead of the others.
const goodwillYAML = `
approvers:
  alice: {key: "%s", roles: [support]}
  bob:   {key: "%s", roles: [finance]}
  carol: {key: "%s", roles: [finance]}
tools:
  close_ticket: {approvers: {roles: [support]}}
  refund:
    rules:
      - {id: goodwill, when: "args.reason == 'goodwill'", decide: allow}
      - {id: no-test-refunds, when: "has(args.reason) && args.reason.contains('test')", decide: deny}
      - {id: small-refunds, when: "args.amount_cents <= 5000", decide: allow}
      - {id: large-refunds, when: "args.amount_cents > 20000", decide: ask, approvers: {roles: [finance], count: 2}}
    approvers: {roles: [finance]}
`

// The trust boundary's second pass (issue 20) on the real server, for what
// approvers' tokens and the policy's rules can be made to do.
func TestTrustSecondPassPolicy(t *testing.T) {
	ps := newPolicyStackWith(t, goodwillYAML, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*waitTimeout)
	defer cancel()
	sign := func(t *testing.T, key string, c signed.Claims) string {
		t.Helper()
		if c.IssuedAt == 0 {
			c.IssuedAt, c.Expiry = time.Now().Unix(), time.Now().Add(10*time.Minute).Unix()
		}
		tok, err := signed.Sign(ps.keys[key], c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	update := func(id, name string, arg any) error {
		h, err := ps.client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name, Args: []any{arg},
			WaitForStage: client.WorkflowUpdateStageCompleted})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		return err
	}

	t.Run("a rule that cannot be evaluated never lowers the bar", func(t *testing.T) {
		s := ps.on(t)
		const id = "trust2-goodwill"
		s.start(id, workflows.RunInput{Goal: "refunds", Planner: scripted("done", step(refundOf(40000)), step(refundOf(9000)), step(refundOf(40000)))})
		// 40,000 with no reason: goodwill cannot be evaluated, large-refunds asks two of finance.
		it := s.awaitCall(id, "c-1")
		if it.Rule != "large-refunds" || it.Needs == nil || it.Needs.Count != 2 || !strings.Contains(it.Reason, "rule goodwill could not be evaluated") {
			t.Fatalf("c-1 waits on rule %q for %+v (%s); want large-refunds, two of finance", it.Rule, it.Needs, it.Reason)
		}
		if _, err := s.tg.Grant(ctx, id, "bob", s.keys["bob"], signed.Grant{Tool: "refund"}); err != nil {
			t.Fatal(err)
		}
		if out := s.decide(id, true, s.as("bob"), "c-1"); out.Err != nil || out.Result.Decision != workflows.DecisionCounted {
			t.Fatalf("bob approves c-1: %+v, want counted", out)
		}
		s.checkDone(id)
		s.decide(id, true, s.as("carol"), "c-1")
		// 9,000 with no reason: a verdict reached by failing closed, which bob's grant (no when) does not answer.
		s.awaitCall(id, "c-2")
		if g := s.mustState(id).Grants; len(g) != 1 || g[0].Used != 0 {
			t.Fatalf("grants %+v, want bob's unused", g)
		}
		s.decide(id, false, s.as("carol"), "c-2")
		// 40,000 edited down to 4,000 still needs two: an edit never needs fewer approvals than the call as proposed.
		s.awaitCall(id, "c-3")
		bob := s.as("bob")
		bob.EditedArgs = json.RawMessage(`{"booking_id":"BK-1","amount_cents":4000}`)
		if out := s.decide(id, true, bob, "c-3"); out.Err != nil || out.Result.Decision != workflows.DecisionCounted || out.Result.Needed != 2 {
			t.Fatalf("bob's edit of c-3: %+v, want counted, 1 of 2", out)
		}
		s.decide(id, false, s.as("carol"), "c-3")
		s.finish(id, "c-1 refund 40000")
	})

	t.Run("a token is taken once", func(t *testing.T) {
		s := ps.on(t)
		const id = "trust2-replay"
		s.start(id, workflows.RunInput{Goal: "refunds", Planner: scripted("done", step(refundOf(40000)))})
		s.awaitCall(id, "c-1")
		grant := sign(t, "bob", signed.Claims{Approver: "bob", WorkflowID: id, Action: signed.ActionGrant, Grant: &signed.Grant{Tool: "refund", Uses: 1}})
		if err := update(id, workflows.UpdateGrant, workflows.TokenInput{Token: grant}); err != nil {
			t.Fatal(err)
		}
		requireRefused(t, "the grant sent again", update(id, workflows.UpdateGrant, workflows.TokenInput{Token: grant}), workflows.RefusedUnauthorized, "bob's token was taken already in this run chain")
		if _, err := s.tg.Revoke(ctx, id, "carol", s.keys["carol"], "g-1"); err != nil {
			t.Fatal(err)
		}
		requireRefused(t, "the grant sent after its revocation", update(id, workflows.UpdateGrant, workflows.TokenInput{Token: grant}), workflows.RefusedUnauthorized, "taken already")
		long := sign(t, "bob", signed.Claims{Approver: "bob", WorkflowID: id, Action: signed.ActionGrant, Grant: &signed.Grant{Tool: "refund"},
			IssuedAt: time.Now().Unix(), Expiry: time.Now().Add(2 * time.Hour).Unix()})
		requireRefused(t, "a token valid for two hours", update(id, workflows.UpdateGrant, workflows.TokenInput{Token: long}), workflows.RefusedUnauthorized, "longer than the 1h0m0s")
		// A token signed with carol's key in bob's name: the refusal names bob.
		forged := sign(t, "carol", signed.Claims{Approver: "bob", WorkflowID: id, Action: signed.ActionGrant, Grant: &signed.Grant{Tool: "refund"}})
		requireRefused(t, "bob's name, carol's key", update(id, workflows.UpdateGrant, workflows.TokenInput{Token: forged}), workflows.RefusedUnauthorized, "not signed by bob's key")
		if g := s.mustState(id).Grants; len(g) != 1 || g[0].RevokedBy != "carol" {
			t.Fatalf("grants %+v, want one, revoked", g)
		}
		s.decide(id, false, s.as("carol"), "c-1")
		s.finish(id)
	})

	t.Run("a start token starts its input once", func(t *testing.T) {
		s := ps.on(t)
		const id = "trust2-start"
		in := workflows.RunInput{Goal: "a small refund", Planner: scripted("done", step(refundOf(3000)))}
		if err := tgclient.SignStart(&in, id, "bob", s.keys["bob"], 0); err != nil {
			t.Fatal(err)
		}
		s.start(id, in)
		s.finish(id, "c-1 refund 3000")
		if st := s.mustState(id); st.RequestedBy != "bob" {
			t.Fatalf("requested by %q, want bob", st.RequestedBy)
		}
		// bob's token on another plan under the same id.
		other := workflows.RunInput{Goal: in.Goal, Planner: scripted("done", step(refundOf(4000))), RequestToken: in.RequestToken}
		err := s.startRaw(id, other)
		requireInvalidInput(t, err, "request_token refused: bob's token signs another input")
		// The same token and input again: the token has started its run.
		err = s.startRaw(id, in)
		requireInvalidInput(t, err, "request_token refused: this token has started a run already")
		s.checkDone(id, "c-1 refund 3000")
	})
}

// startRaw starts run id with in (through the Temporal client, as any
// client can) and waits for how it ends.
func (s *stack) startRaw(id string, in workflows.RunInput) error {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	run, err := s.client.ExecuteWorkflow(ctx, clientStart(id), workflows.WorkflowName, in)
	if err != nil {
		s.t.Fatal(err)
	}
	return run.Get(ctx, nil)
}

// requireRefused fails unless err is an update's refusal of type typ saying msg.
func requireRefused(t *testing.T, what string, err error, typ, msg string) {
	t.Helper()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != typ || !strings.Contains(appErr.Error(), msg) {
		t.Errorf("%s: %v; want a refusal of type %s saying %q", what, err, typ, msg)
	}
}
