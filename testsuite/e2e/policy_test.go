package e2e

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// policyYAML is the policy (docs/policy.md's, its deny first); the three keys are filled in.
const policyYAML = `
approvers:
  alice: {key: "%s", roles: [support]}
  bob:   {key: "%s", roles: [finance]}
  carol: {key: "%s", roles: [finance]}
tools:
  close_ticket: {approvers: {roles: [support]}}
  refund:
    rules:
      - {id: no-test-refunds, when: "has(args.reason) && args.reason.contains('test')", decide: deny}
      - {id: small-refunds, when: "args.amount_cents <= 5000", decide: allow}
      - {id: large-refunds, when: "args.amount_cents > 50000", decide: ask, approvers: {roles: [finance], count: 2}}
    approvers: {roles: [finance]}
`

// payDesk is the policy test's own desk. Each call's side effect (a payment,
// a closed ticket) happens once per idempotency key, whatever runs it again.
type payDesk struct {
	mu      sync.Mutex
	effects map[string]string // idempotency key -> "refund 9000", "close TKT-1"
}

func (d *payDesk) once(ctx context.Context, effect string) string {
	info, _ := tool.InfoFrom(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.effects[info.IdempotencyKey]; !ok {
		d.effects[info.IdempotencyKey] = effect
	}
	return d.effects[info.IdempotencyKey]
}

type payArgs struct {
	BookingID   string `json:"booking_id"`
	AmountCents int    `json:"amount_cents"`
	Reason      string `json:"reason,omitempty"`
}

type ticketArgs struct {
	TicketID string `json:"ticket_id"`
}

func (d *payDesk) tools() []tool.Tool {
	return []tool.Tool{
		tool.New(tool.Spec{Name: "refund", Destructive: true, Schema: json.RawMessage(`{"type":"object","properties":{
			"booking_id":{"type":"string"},"amount_cents":{"type":"integer","minimum":1},"reason":{"type":"string"}},
			"required":["booking_id","amount_cents"],"additionalProperties":false}`)},
			func(ctx context.Context, a payArgs) (string, error) {
				return d.once(ctx, fmt.Sprintf("refund %d", a.AmountCents)), nil
			}),
		tool.New(tool.Spec{Name: "close_ticket", Destructive: true, Schema: json.RawMessage(`{"type":"object","properties":{
			"ticket_id":{"type":"string"}},"required":["ticket_id"],"additionalProperties":false}`)},
			func(ctx context.Context, a ticketArgs) (string, error) {
				return d.once(ctx, "close "+a.TicketID), nil
			}),
	}
}

// done lists the side effects of run id's calls: "c-1 refund 3000", … (sorted
// as strings: the runs here make fewer than ten calls).
func (d *payDesk) done(id string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for key, effect := range d.effects {
		if rest, ok := strings.CutPrefix(key, id+"/"); ok { // CHAIN/CALL_ID/ARGS_DIGEST16 (tool.ArgsKey)
			parts := strings.Split(rest, "/")
			out = append(out, parts[min(1, len(parts)-1)]+" "+effect)
		}
	}
	slices.Sort(out)
	return out
}

// policyStack is a stack whose worker runs payDesk's tools under the issue's
// policy, and the approvers' keys.
type policyStack struct {
	*stack
	desk *payDesk
	keys map[string]ed25519.PrivateKey
}

func newPolicyStack(t *testing.T) *policyStack { return newPolicyStackWith(t, policyYAML, nil) }

// newPolicyStackWith is newPolicyStack under another policy: src with the
// three keys filled in, then changed by edit (if set).
func newPolicyStackWith(t *testing.T, src string, edit func(*policy.Policy)) *policyStack {
	s := &policyStack{stack: newStack(t), desk: &payDesk{effects: map[string]string{}},
		keys: map[string]ed25519.PrivateKey{}}
	var pubs []any
	for _, name := range []string{"alice", "bob", "carol"} {
		pub, priv, err := signed.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		s.keys[name], pubs = priv, append(pubs, signed.FormatPublicKey(pub))
	}
	pol, err := policy.Parse(fmt.Appendf(nil, src, pubs...))
	if err != nil {
		t.Fatalf("policy.Parse: %v", err)
	}
	if edit != nil {
		edit(pol)
	}
	w, err := worker.Start(s.client, workflows.TaskQueue, worker.Options{Tools: s.desk.tools(), Policy: pol, SearchAttributes: true})
	if err != nil {
		t.Fatalf("worker.Start: %v", err)
	}
	t.Cleanup(w.Stop)
	return s
}

// on is s for subtest t (the stack's helpers fail t).
func (s *policyStack) on(t *testing.T) *policyStack {
	st := *s.stack
	st.t = t
	return &policyStack{stack: &st, desk: s.desk, keys: s.keys}
}

func (s *policyStack) as(name string) tgclient.Decider {
	return tgclient.Decider{Approver: name, Key: s.keys[name], Text: "ok by " + name}
}

// decide approves (or rejects) one call as who through the client and
// returns its outcome.
func (s *policyStack) decide(id string, approve bool, who tgclient.Decider, callID string) tgclient.Outcome {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	decide := s.tg.Reject
	if approve {
		decide = s.tg.Approve
	}
	outs, err := decide(ctx, id, who, callID)
	if err != nil {
		s.t.Fatalf("deciding %s of %s: %v", callID, id, err)
	}
	return outs[0]
}

// awaitCall waits until callID is the one call of run id waiting for a decision.
func (s *policyStack) awaitCall(id, callID string) workflows.Interrupt {
	s.t.Helper()
	var it workflows.Interrupt
	testenv.Eventually(s.t, waitTimeout, id+" waits on "+callID, func() error {
		st, err := s.state(id)
		if err != nil {
			return err
		}
		if st.Status != workflows.StatusRunning && st.Status != workflows.StatusWaitingForApproval {
			s.t.Fatalf("%s is %s, never waited on %s", id, st.Status, callID)
		}
		if st.Status != workflows.StatusWaitingForApproval || len(st.Interrupts) != 1 || st.Interrupts[0].CallID != callID {
			return fmt.Errorf("status %s, interrupts %+v", st.Status, st.Interrupts)
		}
		it = st.Interrupts[0]
		return nil
	})
	return it
}

// finish waits for run id to complete, and checks what its calls did.
func (s *policyStack) finish(id string, want ...string) {
	s.t.Helper()
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted {
		s.t.Fatalf("%s ended %s (%s), want completed", id, res.Status, res.Error)
	}
	s.checkDone(id, want...)
}

// checkDone fails unless run id's calls did exactly want, once each.
func (s *policyStack) checkDone(id string, want ...string) {
	s.t.Helper()
	if got := s.desk.done(id); !equal(got, want) {
		s.t.Fatalf("side effects of %s: %q, want %q", id, got, want)
	}
}

func refused(t *testing.T, what string, err, kind error, msg string) {
	t.Helper()
	if !errors.Is(err, kind) || !strings.Contains(fmt.Sprint(err), msg) {
		t.Errorf("%s: %v; want %v saying %q", what, err, kind, msg)
	}
}

func refundOf(cents int) tool.Proposal {
	return call("refund", fmt.Sprintf(`{"booking_id":"BK-1","amount_cents":%d}`, cents))
}

// The scenario on the real server, through the client package: rules
// allow, ask and deny; only signed decisions of the right approvers count; a
// quorum needs distinct approvers; the requester approves nothing; edits are
// checked again; a grant answers its uses and no more. Every payment once.
func TestPolicyEndToEnd(t *testing.T) {
	ps := newPolicyStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*waitTimeout)
	defer cancel()

	t.Run("rules, signatures and quorum", func(t *testing.T) {
		s := ps.on(t)
		const id = "policy-rules"
		s.start(id, workflows.RunInput{Goal: "refund BK-1", Planner: scripted("refunded",
			step(refundOf(3000)), step(refundOf(9000)), step(refundOf(60000)))})

		// 1. 3,000 passes by small-refunds: paid, and nobody was asked.
		it := s.awaitCall(id, "c-2")
		s.checkDone(id, "c-1 refund 3000")
		tr := s.mustTrace(id)
		checkEvents(t, "trace", tr, event{"c-1", "refund", "approved"}, event{"c-1", "refund", "ok"}, event{"c-2", "refund", "blocked"})
		if tr[0].Approver != "rule:small-refunds" || tr[0].Rule != "small-refunds" {
			t.Errorf("c-1 approved by %q (rule %q), want rule:small-refunds", tr[0].Approver, tr[0].Rule)
		}

		// 2. 9,000 matches no rule: one of finance.
		if it.Rule != "" || !reflect.DeepEqual(it.Needs, &policy.Approvers{Roles: []string{"finance"}, Count: 1}) {
			t.Errorf("c-2 waits for rule %q, needs %+v; want the tool's approvers, 1 of finance", it.Rule, it.Needs)
		}
		_, err := s.tg.Decide(ctx, id, true, workflows.DecisionInput{CallID: "c-2", Approver: "bob", ArgsDigest: it.ArgsDigest})
		refused(t, "unsigned", err, tgclient.ErrUnauthorized, "unsigned")
		refused(t, "alice", s.decide(id, true, s.as("alice"), "c-2").Err, tgclient.ErrUnauthorized, "wrong role")
		token := func(c signed.Claims) string {
			c.Approver, c.WorkflowID, c.Action, c.ArgsDigest = "bob", id, signed.ActionApprove, it.ArgsDigest
			tok, err := signed.Sign(s.keys["bob"], c)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		now := time.Now()
		expired := token(signed.Claims{CallID: "c-2", IssuedAt: now.Add(-time.Hour).Unix(), Expiry: now.Add(-time.Minute).Unix()})
		_, err = s.tg.Decide(ctx, id, true, workflows.DecisionInput{CallID: "c-2", ArgsDigest: it.ArgsDigest, Token: expired})
		refused(t, "expired", err, tgclient.ErrUnauthorized, "expired")
		other := token(signed.Claims{CallID: "c-1", IssuedAt: now.Unix(), Expiry: now.Add(time.Minute).Unix()})
		_, err = s.tg.Decide(ctx, id, true, workflows.DecisionInput{CallID: "c-2", ArgsDigest: it.ArgsDigest, Token: other})
		refused(t, "another call", err, tgclient.ErrUnauthorized, `token is for call "c-1", not c-2`)
		s.checkDone(id, "c-1 refund 3000")
		if out := s.decide(id, true, s.as("bob"), "c-2"); out.Err != nil || out.Result.Decision != workflows.TraceApproved {
			t.Fatalf("bob approves c-2: %v", out)
		}

		// 3. 60,000 needs two of finance, distinct.
		it = s.awaitCall(id, "c-3")
		s.checkDone(id, "c-1 refund 3000", "c-2 refund 9000")
		if it.Rule != "large-refunds" || it.Needs == nil || it.Needs.Count != 2 {
			t.Errorf("c-3 waits for rule %q, needs %+v; want large-refunds, 2", it.Rule, it.Needs)
		}
		if out := s.decide(id, true, s.as("bob"), "c-3"); out.Err != nil || out.Result.Decision != workflows.DecisionCounted || out.Result.Needed != 2 {
			t.Fatalf("bob approves c-3: %v, want counted (1 of 2)", out)
		}
		again := s.as("bob")
		again.Text = "ok by bob, again" // a token of its own: the same token sent again is a replay
		refused(t, "bob twice", s.decide(id, true, again, "c-3").Err, tgclient.ErrUnauthorized, "bob has already approved call c-3")
		s.checkDone(id, "c-1 refund 3000", "c-2 refund 9000")
		if out := s.decide(id, true, s.as("carol"), "c-3"); out.Err != nil || out.Result.Decision != workflows.TraceApproved ||
			!equal(out.Result.ApprovedBy, []string{"bob", "carol"}) {
			t.Fatalf("carol approves c-3: %v, want approved by bob and carol", out)
		}
		s.finish(id, "c-1 refund 3000", "c-2 refund 9000", "c-3 refund 60000")
		if a := records(s.mustTrace(id), "c-3", workflows.TraceApproved); len(a) != 1 || a[0].Approver != "bob, carol" {
			t.Errorf("c-3 approvals %+v, want one by bob, carol", a)
		}
	})

	t.Run("self-approval", func(t *testing.T) {
		s := ps.on(t)
		const id = "policy-self"
		in := workflows.RunInput{Goal: "refund and close", Planner: scripted("done",
			step(refundOf(9000)), step(call("close_ticket", `{"ticket_id":"TKT-1"}`)))}
		if err := tgclient.SignStart(&in, id, "bob", s.keys["bob"], 0); err != nil {
			t.Fatal(err)
		}
		s.start(id, in)
		s.awaitCall(id, "c-1")
		if st := s.mustState(id); st.RequestedBy != "bob" || !st.Policy {
			t.Errorf("requested by %q (policy %v), want bob", st.RequestedBy, st.Policy)
		}
		refused(t, "bob on his own run", s.decide(id, true, s.as("bob"), "c-1").Err, tgclient.ErrUnauthorized, "self-approval refused: bob requested this run")
		if out := s.decide(id, true, s.as("carol"), "c-1"); out.Err != nil {
			t.Fatalf("carol approves c-1: %v", out)
		}
		s.awaitCall(id, "c-2")
		refused(t, "carol closes", s.decide(id, true, s.as("carol"), "c-2").Err, tgclient.ErrUnauthorized, "wrong role")
		if out := s.decide(id, true, s.as("alice"), "c-2"); out.Err != nil {
			t.Fatalf("alice approves c-2: %v", out)
		}
		s.finish(id, "c-1 refund 9000", "c-2 close TKT-1")
	})

	t.Run("edit", func(t *testing.T) {
		s := ps.on(t)
		const id = "policy-edit"
		s.start(id, workflows.RunInput{Goal: "refund BK-1", Planner: scripted("refunded", step(refundOf(9000)))})
		s.awaitCall(id, "c-1")
		bob := s.as("bob")
		bob.EditedArgs = json.RawMessage(`{"booking_id":"BK-1","amount_cents":9000,"reason":"test"}`)
		refused(t, "edit to a test refund", s.decide(id, true, bob, "c-1").Err, tgclient.ErrEditRefused, "edit refused: rule no-test-refunds denies refund")
		s.checkDone(id)
		bob.EditedArgs = json.RawMessage(`{"booking_id":"BK-1","amount_cents":8000}`)
		if out := s.decide(id, true, bob, "c-1"); out.Err != nil || out.Result.Decision != workflows.TraceApproved {
			t.Fatalf("bob approves c-1 edited to 8,000: %v", out)
		}
		s.finish(id, "c-1 refund 8000")
		a := records(s.mustTrace(id), "c-1", workflows.TraceEdited)
		if len(a) != 1 || !sameJSON(a[0].OriginalArgs, `{"booking_id":"BK-1","amount_cents":9000}`) ||
			!sameJSON(a[0].Args, `{"booking_id":"BK-1","amount_cents":8000}`) {
			t.Errorf("c-1 approvals %+v, want one of 8,000 with the original 9,000", a)
		}
	})

	t.Run("grant", func(t *testing.T) {
		s := ps.on(t)
		const id = "policy-grant"
		s.start(id, workflows.RunInput{Goal: "refund BK-1 in parts", Planner: scripted("refunded",
			step(refundOf(9000)), step(refundOf(9001)), step(refundOf(9002)), step(refundOf(9003)))})
		s.awaitCall(id, "c-1")
		_, err := s.tg.Grant(ctx, id, "alice", s.keys["alice"], signed.Grant{Tool: "refund", Uses: 2})
		refused(t, "alice grants refund", err, tgclient.ErrUnauthorized, "wrong role to grant refund")
		g, err := s.tg.Grant(ctx, id, "bob", s.keys["bob"], signed.Grant{Tool: "refund", Uses: 2})
		if err != nil || g.ID != "g-1" || g.Uses != 2 {
			t.Fatalf("bob grants refund: %+v, %v", g, err)
		}
		s.checkDone(id)
		if out := s.decide(id, true, s.as("carol"), "c-1"); out.Err != nil {
			t.Fatalf("carol approves c-1: %v", out)
		}
		s.awaitCall(id, "c-4")
		s.checkDone(id, "c-1 refund 9000", "c-2 refund 9001", "c-3 refund 9002")
		if st := s.mustState(id); len(st.Grants) != 1 || st.Grants[0].Used != 2 {
			t.Errorf("grants %+v, want g-1 used twice", st.Grants)
		}
		var granted []string
		for _, r := range s.mustTrace(id) {
			if r.Status == workflows.TraceApproved && r.Approver == "grant:bob" {
				granted = append(granted, r.CallID+" "+r.Reason)
			}
		}
		if want := []string{"c-2 grant g-1, use 1 of 2", "c-3 grant g-1, use 2 of 2"}; !equal(granted, want) {
			t.Errorf("granted %q, want %q", granted, want)
		}
		if out := s.decide(id, false, tgclient.Decider{Approver: "carol", Key: s.keys["carol"], Text: "enough"}, "c-4"); out.Err != nil {
			t.Fatalf("carol rejects c-4: %v", out)
		}
		s.finish(id, "c-1 refund 9000", "c-2 refund 9001", "c-3 refund 9002")
	})
}

// sameJSON reports whether got is the JSON object want.
func sameJSON(got json.RawMessage, want string) bool {
	var a, b any
	return json.Unmarshal(got, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && reflect.DeepEqual(a, b)
}
