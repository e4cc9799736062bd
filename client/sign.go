package client

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// DefaultValidFor is how long a token the client signs stays valid.
const DefaultValidFor = 10 * time.Minute

// claims fills in the claims every token has: who, which run, when, and a
// random token id, so that no two tokens signed are the same (the same
// decision signed twice within a second would be otherwise, and a run takes
// a token once).
func claims(approver, id, action string, validFor time.Duration) signed.Claims {
	if validFor <= 0 {
		validFor = DefaultValidFor
	}
	now := time.Now()
	return signed.Claims{Approver: approver, WorkflowID: id, Action: action, ID: signed.NewID(), IssuedAt: now.Unix(), Expiry: now.Add(validFor).Unix()}
}

// signDecision signs who's decision on the interrupt it was bound to.
func signDecision(id, action string, who Decider, it workflows.Interrupt, in workflows.DecisionInput) (string, error) {
	if it.CallID == "" {
		return "", refused(ErrAlreadyDecided, fmt.Sprintf("call %s is not waiting for a decision in run %s: nothing to sign", in.CallID, id))
	}
	c := claims(who.Approver, id, action, who.ValidFor)
	c.CallID, c.ArgsDigest, c.Note, c.Reason = in.CallID, in.ArgsDigest, in.Note, in.Reason
	c.Kind, c.Asked = string(it.Kind), it.RequestedAt.UnixNano()
	if len(in.EditedArgs) > 0 {
		d, err := tool.Digest(it.Tool, in.EditedArgs)
		if err != nil {
			return "", refused(ErrRefusedInput, fmt.Sprintf("edited arguments: %v", err))
		}
		c.EditedDigest = d
	}
	for what, v := range map[string]json.RawMessage{"data": in.Data, "response": in.Response} {
		if len(v) == 0 {
			continue
		}
		d, err := workflows.DataDigest(v)
		if err != nil {
			return "", refused(ErrRefusedInput, fmt.Sprintf("%s: %v", what, err))
		}
		c.DataDigest = d
	}
	tok, err := signed.Sign(who.Key, c)
	if err != nil {
		return "", fmt.Errorf("signing %s's decision: %w", who.Approver, err)
	}
	return tok, nil
}

// SignStart signs in as requested by approver for run id: the run records
// who requested it (its RequestToken), and that approver may then approve
// none of its calls. The token is valid for validFor (0: DefaultValidFor)
// from now; start the run within that time.
func SignStart(in *workflows.RunInput, id, approver string, key ed25519.PrivateKey, validFor time.Duration) error {
	return signStart(in, id, approver, signed.ActionStart, key, validFor)
}

// signStart signs in's start (or fork) as approver.
func signStart(in *workflows.RunInput, id, approver, action string, key ed25519.PrivateKey, validFor time.Duration) error {
	c := claims(approver, id, action, validFor)
	if action == signed.ActionStart {
		c.GoalDigest = workflows.GoalDigest(in.Goal)
	}
	unsigned := *in
	unsigned.RequestToken = ""
	raw, err := json.Marshal(unsigned)
	if err != nil {
		return fmt.Errorf("signing the start as %s: %w", approver, err)
	}
	if c.InputDigest, err = workflows.InputDigest(raw); err != nil {
		return fmt.Errorf("signing the start as %s: %w", approver, err)
	}
	tok, err := signed.Sign(key, c)
	if err != nil {
		return fmt.Errorf("signing the start as %s: %w", approver, err)
	}
	in.RequestToken = tok
	return nil
}

// Grant signs and sends approver's grant of g for run id: later calls of
// g.Tool that match g.When and would ask one approver pass the gate as
// approved by grant:<approver>, for g.Uses calls (0: no limit) until g.Until.
func (c *Client) Grant(ctx context.Context, id, approver string, key ed25519.PrivateKey, g signed.Grant) (workflows.Grant, error) {
	cl := claims(approver, id, signed.ActionGrant, 0)
	cl.Grant = &g
	return c.sendGrant(ctx, id, workflows.UpdateGrant, key, cl)
}

// Revoke signs and sends approver's revocation of grant grantID ("g-1") of run id.
func (c *Client) Revoke(ctx context.Context, id, approver string, key ed25519.PrivateKey, grantID string) (workflows.Grant, error) {
	cl := claims(approver, id, signed.ActionRevoke, 0)
	cl.GrantID = grantID
	return c.sendGrant(ctx, id, workflows.UpdateRevoke, key, cl)
}

func (c *Client) sendGrant(ctx context.Context, id, update string, key ed25519.PrivateKey, cl signed.Claims) (workflows.Grant, error) {
	tok, err := signed.Sign(key, cl)
	if err != nil {
		return workflows.Grant{}, fmt.Errorf("signing the %s: %w", update, err)
	}
	h, err := c.tc.UpdateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{WorkflowID: id, UpdateName: update,
		Args: []any{workflows.TokenInput{Token: tok}}, WaitForStage: sdkclient.WorkflowUpdateStageCompleted})
	if err != nil {
		return workflows.Grant{}, c.classifyTo(ctx, id, err, "grants or revocations")
	}
	var res workflows.GrantResult
	if err := h.Get(ctx, &res); err != nil {
		return workflows.Grant{}, c.classifyTo(ctx, id, err, "grants or revocations")
	}
	return res.Grant, nil
}
