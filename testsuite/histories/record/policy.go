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
  close_ticket:
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
}

func newSigners() (*signers, error) {
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
	p, err := policy.Parse([]byte(fmt.Sprintf(fixturePolicy, pubs...)))
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
