package client

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/signed"

	"github.com/toolgate/toolgate/workflows"
)

// Decider says who decides, and why: the approver's name, a note (approve)
// or a reason (reject, which the planner is told).
type Decider struct {
	Approver string
	Text     string
	// Key signs each decision as Approver (a worker with a policy takes no
	// other); see signed.ReadPrivateKey.
	Key ed25519.PrivateKey
	// ValidFor is how long a signed decision stays valid (default 10 minutes).
	ValidFor time.Duration
	// EditedArgs (approve, one call only) approves the call with these
	// arguments instead of the proposed ones.
	EditedArgs json.RawMessage
	// Data (approve, one call held by the tool's own question) answers what
	// the tool asked: an MCP server's elicitation.
	Data json.RawMessage
	// Cancel (reject) cancels the calls rather than says no to them: the
	// trace and the planner say "cancelled".
	Cancel bool
}

// As is a Decider with a name and no note.
func As(approver string) Decider { return Decider{Approver: approver} }

// Outcome is what became of the decision for one call.
type Outcome struct {
	CallID string
	// Interrupt is the waiting call as the decision was bound to it (the
	// arguments and the args_digest the state showed); zero if the call was
	// not waiting.
	Interrupt workflows.Interrupt
	Result    workflows.DecisionResult
	Err       error
}

// Approve approves the named waiting calls of run id. It reads the run's
// state once and binds each decision to the args_digest (and kind) the state
// shows for that call, then sends each as an update, which the run validates
// before it takes it. Outcomes are in callIDs' order; a refused one has Err
// set (typed: ErrUnknownCall, ErrAlreadyDecided, ErrDigestMismatch …).
func (c *Client) Approve(ctx context.Context, id string, who Decider, callIDs ...string) ([]Outcome, error) {
	return c.decideAll(ctx, id, signed.ActionApprove, who, callIDs, nil)
}

// Reject rejects the named waiting calls of run id, as Approve approves
// them; who.Text is the reason the planner is told.
func (c *Client) Reject(ctx context.Context, id string, who Decider, callIDs ...string) ([]Outcome, error) {
	return c.decideAll(ctx, id, signed.ActionReject, who, callIDs, nil)
}

// RespondTo answers one waiting call of run id in its tool's place with
// response, bound to the args_digest the state shows, as Approve binds an
// approval; who.Text is a note kept with it. The tool does not run, and the
// planner gets the response as a human's. The run takes it only for a tool
// that is not destructive, or where the policy rule that asked allows it.
func (c *Client) RespondTo(ctx context.Context, id string, who Decider, callID string, response json.RawMessage) (Outcome, error) {
	outs, err := c.decideAll(ctx, id, signed.ActionRespond, who, []string{callID}, response)
	if err != nil {
		return Outcome{}, err
	}
	return outs[0], nil
}

func (c *Client) decideAll(ctx context.Context, id, action string, who Decider, callIDs []string, response json.RawMessage) ([]Outcome, error) {
	st, err := c.State(ctx, id)
	if err != nil {
		return nil, err
	}
	approve := action == signed.ActionApprove
	if (len(who.EditedArgs) > 0 || len(who.Data) > 0) && (!approve || len(callIDs) != 1) {
		return nil, refused(ErrRefusedInput, "edited arguments and data approve exactly one call")
	}
	if who.Cancel && action != signed.ActionReject {
		return nil, refused(ErrRefusedInput, "cancel goes with a rejection")
	}
	outs := make([]Outcome, len(callIDs))
	if ended(st.Status) {
		// A run that has closed takes no decision: say so, rather than that
		// its calls do not wait (which signing would find first).
		if err := c.closedNow(ctx, id, "decisions"); err != nil {
			for i, callID := range callIDs {
				outs[i] = Outcome{CallID: callID, Err: err}
			}
			return outs, nil
		}
	}
	for i, callID := range callIDs {
		in := workflows.DecisionInput{CallID: callID, Approver: who.Approver, EditedArgs: who.EditedArgs, Data: who.Data, Response: response}
		if action == signed.ActionReject {
			in.Reason, in.Cancel = who.Text, who.Cancel
		} else {
			in.Note = who.Text
		}
		outs[i].CallID = callID
		for _, it := range st.Interrupts {
			if it.CallID == callID {
				outs[i].Interrupt = it
				in.ArgsDigest, in.Kind = it.ArgsDigest, it.Kind
			}
		}
		if who.Key != nil {
			if in.Token, outs[i].Err = signDecision(id, action, who, outs[i].Interrupt, in); outs[i].Err != nil {
				continue
			}
		}
		if action == signed.ActionRespond {
			outs[i].Result, outs[i].Err = c.Respond(ctx, id, in)
		} else {
			outs[i].Result, outs[i].Err = c.Decide(ctx, id, approve, in)
		}
	}
	c.sayWhoDecided(ctx, id, outs)
	return outs, nil
}

// sayWhoDecided rewords the refusals of decisions on calls that no longer
// wait (ErrAlreadyDecided: the state showed them decided, or another
// decision came first) as who decided them, when and how, from the run's
// trace. A trace that cannot be read leaves the refusals as they are.
func (c *Client) sayWhoDecided(ctx context.Context, id string, outs []Outcome) {
	var trace []workflows.TraceRecord
	read := false
	for i := range outs {
		o := &outs[i]
		if o.Err == nil || !errors.Is(o.Err, ErrAlreadyDecided) {
			continue
		}
		if !read {
			trace, _ = c.Trace(ctx, id)
			read = true
		}
		if r, ok := lastDecision(trace, o.CallID); ok {
			o.Err = refused(ErrAlreadyDecided, decidedAlready(r))
		}
	}
}

// lastDecision is the trace's last record of callID's decision (or expiry).
func lastDecision(trace []workflows.TraceRecord, callID string) (workflows.TraceRecord, bool) {
	for i := len(trace) - 1; i >= 0; i-- {
		r := trace[i]
		if r.CallID != callID {
			continue
		}
		switch r.Status {
		case workflows.TraceApproved, workflows.TraceEdited, workflows.TraceRejected, workflows.TraceCancelled,
			workflows.TraceResponded, workflows.TraceExpired:
			return r, true
		}
	}
	return workflows.TraceRecord{}, false
}

// decidedAlready says who decided r's call, when and how.
func decidedAlready(r workflows.TraceRecord) string {
	at := r.At.UTC().Format(time.RFC3339)
	switch {
	case r.Status == workflows.TraceExpired:
		return fmt.Sprintf("%s (%s) expired at %s, waiting for a decision: nothing decides it any more", r.CallID, r.Tool, at)
	case r.Approver == "":
		return fmt.Sprintf("%s (%s) was decided already at %s (%s): nothing more to do", r.CallID, r.Tool, at, r.Status)
	}
	return fmt.Sprintf("%s (%s) was decided already by %s at %s (%s): nothing more to do", r.CallID, r.Tool, r.Approver, at, r.Status)
}

// DecideOption adjusts the update a decision is sent as.
type DecideOption func(*sdkclient.UpdateWorkflowOptions)

// WithUpdateID gives the decision's update an id. Temporal takes one update
// per id in a run: the same decision sent again under the same id (a retry
// after a lost answer) returns the first one's outcome and acts once.
func WithUpdateID(id string) DecideOption {
	return func(o *sdkclient.UpdateWorkflowOptions) { o.UpdateID = id }
}

// Decide sends one decision exactly as given (the caller binds it to the
// args_digest it showed its approver) as an update, and waits for the run's
// answer.
func (c *Client) Decide(ctx context.Context, id string, approve bool, in workflows.DecisionInput, opts ...DecideOption) (workflows.DecisionResult, error) {
	name := workflows.UpdateReject
	if approve {
		name = workflows.UpdateApprove
	}
	return c.update(ctx, id, name, in, opts)
}

// Respond answers a waiting call in the tool's place with in.Response (the
// update respond): the tool does not run and the planner gets the response,
// marked as a human's. The run takes it only for a tool that is not
// destructive, or where the policy rule that asked allows it.
func (c *Client) Respond(ctx context.Context, id string, in workflows.DecisionInput, opts ...DecideOption) (workflows.DecisionResult, error) {
	if len(in.Response) == 0 {
		return workflows.DecisionResult{}, refused(ErrRefusedInput, "a response needs the answer to give in the tool's place")
	}
	return c.update(ctx, id, workflows.UpdateRespond, in, opts)
}

func (c *Client) update(ctx context.Context, id, name string, in workflows.DecisionInput, opts []DecideOption) (workflows.DecisionResult, error) {
	uo := sdkclient.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name, Args: []any{in},
		WaitForStage: sdkclient.WorkflowUpdateStageCompleted}
	for _, o := range opts {
		o(&uo)
	}
	h, err := c.tc.UpdateWorkflow(ctx, uo)
	if err != nil {
		return workflows.DecisionResult{}, c.classifyTo(ctx, id, err, "decisions")
	}
	var res workflows.DecisionResult
	if err := h.Get(ctx, &res); err != nil {
		return workflows.DecisionResult{}, c.classifyTo(ctx, id, err, "decisions")
	}
	return res, nil
}

// Refused counts the outcomes whose decision was refused.
func Refused(outs []Outcome) int {
	n := 0
	for _, o := range outs {
		if o.Err != nil {
			n++
		}
	}
	return n
}

// String says what happened to the decision.
func (o Outcome) String() string {
	if o.Err != nil {
		return fmt.Sprintf("%s refused: %v", o.CallID, o.Err)
	}
	if o.Result.Decision == workflows.DecisionCounted {
		return fmt.Sprintf("counted %s (%s) by %s: %d of %d approvals (%s); it waits for more",
			o.Result.CallID, o.Result.Tool, o.Result.Approver, len(o.Result.ApprovedBy), o.Result.Needed, strings.Join(o.Result.ApprovedBy, ", "))
	}
	return fmt.Sprintf("%s %s (%s) by %s", o.Result.Decision, o.Result.CallID, o.Result.Tool, o.Result.Approver)
}
