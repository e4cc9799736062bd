package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/client"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// fixturePolicy is the policy of the policy_* flows; its %s are the public
// keys of alice, bob, carol and dave, in that order. Thresholds fit the demo
// desk's bookings (BK-1 24000 cents, BK-2 45000, BK-3 9900): a refund above
// what is left of a booking fails in the tool.
const fixturePolicy = `
approvers:
  alice: {key: "%s", roles: [support]}
  bob:   {key: "%s", roles: [finance]}
  carol: {key: "%s", roles: [finance]}
  dave:  {key: "%s", roles: [ops]}
tools:
  search_tickets:
    rules:
      - {id: ask-archive, when: "args.query == 'archive'", decide: ask, approvers: {roles: [support]}}
  close_ticket:
    rules:
      - {id: answer-tkt-5, when: "args.ticket_id == 'TKT-5'", decide: ask, approvers: {roles: [support]}, respond: true}
    approvers: {roles: [support]}
  refund:
    rules:
      - {id: small-refunds, when: "args.amount_cents <= 3000", decide: allow}
      - {id: large-refunds, when: "args.amount_cents > 20000", decide: ask, approvers: {roles: [finance], count: 2}}
      - {id: no-test-refunds, when: "has(args.reason) && args.reason.contains('test')", decide: deny}
    approvers: {roles: [finance]}
`

// fixtureApprovers are the approvers of fixturePolicy, in its order.
var fixtureApprovers = []string{"alice", "bob", "carol", "dave"}

// signers are a policy flow's approvers: their private keys, in memory for
// the flow's length only, and the policy that declares their public keys.
type signers struct {
	keys   map[string]ed25519.PrivateKey
	policy *policy.Policy
	// The notified flow's Slack fake and the link key its worker signs
	// links with (the secret of a link is read from its token).
	slack   *slackFake
	linkKey ed25519.PrivateKey
}

// fixtureOperators is what the rewound and forked flows add to
// fixturePolicy: dave (ops) may rewind and fork a run.
const fixtureOperators = "operators: [ops]\n"

// newSigners generates the approvers' keys; operators: the policy names
// fixtureOperators too; extra is appended to the policy (guards).
func newSigners(operators bool, extra string) (*signers, error) {
	s := &signers{keys: map[string]ed25519.PrivateKey{}}
	var pubs []any
	for _, name := range fixtureApprovers {
		pub, priv, err := signed.GenerateKey()
		if err != nil {
			return nil, err
		}
		s.keys[name] = priv
		pubs = append(pubs, signed.FormatPublicKey(pub))
	}
	text := fmt.Sprintf(fixturePolicy, pubs...)
	if operators {
		text += fixtureOperators
	}
	text += extra
	p, err := policy.Parse([]byte(text))
	if err != nil {
		return nil, err
	}
	s.policy = p
	return s, nil
}

// signStart sets in's request_token: name requested the run.
func signStart(name string) func(s *signers, id string, in *workflows.RunInput) error {
	return func(s *signers, id string, in *workflows.RunInput) error {
		return tgclient.SignStart(in, id, name, s.keys[name], 0)
	}
}

// decideSigned sends name's signed approve or reject of callID (waiting at
// the gate) as an update, through the client package (which binds it to
// the call as the state shows it); edited, if set, approves these arguments
// instead. It returns the run's answer.
func (s *signers) decideSigned(ctx context.Context, cl client.Client, id, callID, action, name string, edited json.RawMessage) (workflows.DecisionResult, error) {
	if _, err := waitPending(ctx, cl, id, callID, workflows.KindGate); err != nil {
		return workflows.DecisionResult{}, err
	}
	who := tgclient.Decider{Approver: name, Key: s.keys[name], EditedArgs: edited}
	decide := tgclient.New(cl).Approve
	who.Text = "ok by " + name
	if action == signed.ActionReject {
		decide, who.Text = tgclient.New(cl).Reject, "no, says "+name
	}
	outs, err := decide(ctx, id, who, callID)
	if err != nil {
		return workflows.DecisionResult{}, err
	}
	return outs[0].Result, outs[0].Err
}

// grantSigned sends name's signed grant of g as the grant update.
func (s *signers) grantSigned(ctx context.Context, cl client.Client, id, name string, g signed.Grant) (workflows.Grant, error) {
	return tgclient.New(cl).Grant(ctx, id, name, s.keys[name], g)
}

// wantDecision checks what the run answered a decision.
func wantDecision(res workflows.DecisionResult, err error, decision string) error {
	if err != nil {
		return err
	}
	if res.Decision != decision {
		return fmt.Errorf("decision on %s: the run answered %q, want %q", res.CallID, res.Decision, decision)
	}
	return nil
}

func refund(booking string, cents int, extra string) tool.Proposal {
	return proposal("refund", fmt.Sprintf(`{"booking_id":%q,"amount_cents":%d%s}`, booking, cents, extra))
}

// outcomesFlow is every outcome a human decision has from rules version 6
// (the policy_* flows' policy): one step of four calls, each decided
// signed by alice — a read answered in the tool's place (respond), a close
// cancelled, a close answered in its place by a rule that allows it, and a
// close approved with edited arguments.
func outcomesFlow() flow {
	return flow{
		name: "outcomes",
		in: workflows.RunInput{Goal: "answer, cancel and edit", Planner: scripted("decided", []tool.Proposal{
			proposal("search_tickets", `{"query":"archive"}`),
			proposal("close_ticket", `{"ticket_id":"TKT-1"}`),
			proposal("close_ticket", `{"ticket_id":"TKT-5"}`),
			proposal("close_ticket", `{"ticket_id":"TKT-2"}`),
		})},
		policy: true,
		signedDrive: func(ctx context.Context, cl client.Client, id string, s *signers) error {
			tg := tgclient.New(cl)
			alice := tgclient.Decider{Approver: "alice", Key: s.keys["alice"], Text: "answered from the archive"}
			for _, c := range []struct {
				call, want string
				send       func() (tgclient.Outcome, error)
			}{
				{"c-1", workflows.TraceResponded, func() (tgclient.Outcome, error) {
					return tg.RespondTo(ctx, id, alice, "c-1", json.RawMessage(`{"tickets":[]}`))
				}},
				{"c-2", workflows.TraceCancelled, func() (tgclient.Outcome, error) {
					who := alice
					who.Text, who.Cancel = "the customer withdrew", true
					outs, err := tg.Reject(ctx, id, who, "c-2")
					if err != nil {
						return tgclient.Outcome{}, err
					}
					return outs[0], nil
				}},
				{"c-3", workflows.TraceResponded, func() (tgclient.Outcome, error) {
					return tg.RespondTo(ctx, id, alice, "c-3", json.RawMessage(`{"closed":false,"handled":"by phone"}`))
				}},
			} {
				if _, err := waitPending(ctx, cl, id, c.call, workflows.KindGate); err != nil {
					return err
				}
				out, err := c.send()
				if err == nil {
					err = out.Err
				}
				if err := wantDecision(out.Result, err, c.want); err != nil {
					return err
				}
			}
			res, err := s.decideSigned(ctx, cl, id, "c-4", signed.ActionApprove, "alice", json.RawMessage(`{"ticket_id":"TKT-3"}`))
			return wantDecision(res, err, workflows.TraceApproved)
		},
		status:    workflows.StatusCompleted,
		unordered: true, // the four calls run side by side
		trace: []string{"c-1 blocked", "c-2 blocked", "c-3 blocked", "c-4 blocked",
			"c-1 responded", "c-2 cancelled", "c-3 responded", "c-4 edited", "c-4 ok"},
		approvers: []string{"alice"},
		edited:    "c-4",
	}
}
