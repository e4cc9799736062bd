package workflows

import (
	"encoding/json"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/plan"
)

// This file is the withdraw update: the caller that proposed a call (the
// external planner: an MCP client, a Nexus operation) takes it back before it
// runs. A withdrawal only ever stops a call — it approves nothing, spends no
// token and cannot make anything run — so it asks for no signature: who may
// send it is who may send the run updates at all, the same who may cancel or
// terminate it. It is bound to the call's idempotency key, so a caller takes
// back only the call it proposed under that key, and it is refused once the
// call is decided or runs: a side effect that began is never "withdrawn".

// UpdateWithdraw takes a WithdrawInput and answers a CallStatus: the call,
// done and cancelled.
const UpdateWithdraw = "withdraw"

// WithdrawnBy is the approver the trace names for a withdrawn call: its
// caller, who is not an approver (no policy names a name in parentheses).
// Only the withdraw update writes it: from rules version 12 no decision
// may take it, nor a name that looks like it (checkApprover).
const WithdrawnBy = "(caller)"

// WithdrawInput is the payload of the withdraw update.
type WithdrawInput struct {
	// CallID is the call proposed (c-3).
	CallID string `json:"call_id"`
	// Key is the idempotency key it was proposed with; required when it was
	// proposed with one.
	Key string `json:"key,omitempty"`
	// Reason is kept in the trace (at most MaxTextBytes).
	Reason string `json:"reason,omitempty"`
}

// registerWithdraw sets up the withdraw update.
func (r *run) registerWithdraw(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateWithdraw,
		func(ctx workflow.Context, raw json.RawMessage) (CallStatus, error) {
			in, p, err := r.checkWithdraw(raw)
			if err != nil {
				return CallStatus{}, asFailure(err)
			}
			reason := clip(strings.TrimSpace(in.Reason), MaxTextBytes)
			if reason == "" {
				reason = "no reason given"
			}
			p.decided, p.cancel, p.by, p.reason = true, true, WithdrawnBy, "withdrawn by its caller: "+reason
			rec := r.extCall(in.CallID)
			if err := workflow.Await(ctx, func() bool { return rec.Done }); err != nil {
				return CallStatus{}, err
			}
			return r.callStatus(rec, false), nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, raw json.RawMessage) error {
			_, _, err := r.checkWithdraw(raw)
			return asFailure(err)
		}})
}

// checkWithdraw decodes a withdrawal and finds the wait it ends: the call,
// proposed under the key it names, waiting for a human and not decided.
func (r *run) checkWithdraw(raw []byte) (WithdrawInput, *pending, error) {
	var in WithdrawInput
	if r.in.Planner.Kind != plan.KindExternal {
		return in, nil, refusal(RefusedInput, "withdrawal refused: run %s's planner is %q; only a call proposed to a run whose planner is %q can be withdrawn by its caller",
			r.workflowID, clip(r.in.Planner.Kind, MaxNameBytes), plan.KindExternal)
	}
	if len(raw) > MaxKeyBytes+MaxNameBytes+4*MaxTextBytes {
		return in, nil, refusal(RefusedInput, "withdrawal refused: %d bytes", len(raw))
	}
	if err := r.decode(raw, &in); err != nil {
		return in, nil, refusal(RefusedInput, "withdrawal refused (want {\"call_id\",\"key\",\"reason\"}): %s", clip(err.Error(), 300))
	}
	if !r.ready || r.parking {
		return in, nil, refusal(RefusedBusy, "withdrawal refused for now: run %s is starting or continuing as new; send it again in a moment", r.workflowID)
	}
	rec := r.extCall(in.CallID)
	switch {
	case rec == nil:
		return in, nil, refusal(RefusedUnknownCall, "withdrawal refused: run %s remembers no call %q proposed through %s", r.workflowID, clip(in.CallID, MaxNameBytes), UpdatePropose)
	case rec.Key != in.Key:
		return in, nil, refusal(RefusedInput, "withdrawal refused: call %s was proposed under another idempotency key than %q; a caller withdraws only the call it proposed",
			rec.CallID, clip(in.Key, 64))
	case rec.Done:
		return in, nil, refusal(RefusedNotWaiting, "withdrawal refused: call %s (%s) has already ended %s", rec.CallID, rec.Tool, rec.Status)
	}
	for _, p := range r.pending {
		if r.rootOf(p.CallID) == rec.CallID && !p.decided {
			return in, p, nil
		}
	}
	return in, nil, refusal(RefusedNotWaiting, "withdrawal refused: call %s (%s) is not waiting for a human: it was decided, or it runs; a call that began to run is not withdrawn",
		rec.CallID, rec.Tool)
}
