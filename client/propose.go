package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/workflows"
)

// Propose proposes call p to run id, whose planner is external
// (plan.KindExternal), and returns how the call stands once it has finished,
// or waits for a human (Waiting), or the run is continuing as new (neither:
// ask Call again). A proposal whose idempotency key (p.Key) names a call the
// run remembers attaches to it (Attached) and proposes nothing new.
//
// With start non-nil and no run of id running, the run is started with
// start and the proposal goes with its start (update-with-start); a run
// that is running keeps its own input. start is checked as Start checks it.
//
// A proposal the run cannot take now (too many calls open, a
// continue-as-new under way) is refused with ErrBusy: propose it again.
func (c *Client) Propose(ctx context.Context, id string, start *workflows.RunInput, p workflows.Proposal, opts ...StartOption) (workflows.CallStatus, error) {
	if id == "" {
		return workflows.CallStatus{}, refused(ErrRefusedInput, "a run needs a workflow id")
	}
	uo := sdkclient.UpdateWorkflowOptions{WorkflowID: id, UpdateName: workflows.UpdatePropose, Args: []any{p},
		WaitForStage: sdkclient.WorkflowUpdateStageCompleted}
	var h sdkclient.WorkflowUpdateHandle
	var err error
	if start == nil {
		h, err = c.tc.UpdateWorkflow(ctx, uo)
	} else {
		raw, rerr := c.checkStart(*start)
		if rerr != nil {
			return workflows.CallStatus{}, rerr
		}
		so := sdkclient.StartWorkflowOptions{WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING}
		for _, o := range opts {
			o(&so)
		}
		so.ID, so.TaskQueue = id, c.taskQueue
		op := c.tc.NewWithStartWorkflowOperation(so, workflows.WorkflowName, json.RawMessage(raw))
		h, err = c.tc.UpdateWithStartWorkflow(ctx, sdkclient.UpdateWithStartWorkflowOptions{StartWorkflowOperation: op, UpdateOptions: uo})
	}
	return c.callStatus(ctx, id, h, err)
}

// classifyProposal is classify, and ErrBusy for the server's limit on a
// run's updates in flight (history.maxInFlightUpdates, 10 by default): a
// proposal whose call runs long holds its update open, and the eleventh
// such proposal waits its turn like one the run itself refused for now.
func (c *Client) classifyProposal(ctx context.Context, id string, err error) error {
	var re *serviceerror.ResourceExhausted
	if errors.As(err, &re) && re.Cause == enumspb.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT {
		return refused(ErrBusy, fmt.Sprintf("run %s has as many updates in flight as the server allows (%s): propose the call again in a moment", id, re.Message))
	}
	return c.classifyTo(ctx, id, err, "calls")
}

// Call reads how call callID, proposed to run id through Propose, stands
// (the call query).
func (c *Client) Call(ctx context.Context, id, callID string) (workflows.CallStatus, error) {
	v, err := c.tc.QueryWorkflow(ctx, id, "", workflows.QueryCall, callID)
	if err != nil {
		return workflows.CallStatus{}, c.classify(ctx, id, err)
	}
	var st workflows.CallStatus
	if err := v.Get(&st); err != nil {
		return st, fmt.Errorf("decoding call %s of run %s: %w", callID, id, err)
	}
	return st, nil
}

// Withdraw takes back call callID of run id, proposed through Propose under
// idempotency key key, before it runs: the call waits for a human no more and
// ends cancelled, by workflows.WithdrawnBy, with reason in the trace. It
// returns the call, ended. A call decided or running is not withdrawn
// (ErrAlreadyDecided); a run that cannot take it now answers ErrBusy.
func (c *Client) Withdraw(ctx context.Context, id, callID, key, reason string) (workflows.CallStatus, error) {
	h, err := c.tc.UpdateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{WorkflowID: id, UpdateName: workflows.UpdateWithdraw,
		Args: []any{workflows.WithdrawInput{CallID: callID, Key: key, Reason: reason}}, WaitForStage: sdkclient.WorkflowUpdateStageCompleted})
	return c.callStatus(ctx, id, h, err)
}

// callStatus is the CallStatus a propose or withdraw update of run id
// answers through h (sent with err), its refusal classified.
func (c *Client) callStatus(ctx context.Context, id string, h sdkclient.WorkflowUpdateHandle, err error) (workflows.CallStatus, error) {
	if err != nil {
		return workflows.CallStatus{}, c.classifyProposal(ctx, id, err)
	}
	var st workflows.CallStatus
	if err := h.Get(ctx, &st); err != nil {
		return workflows.CallStatus{}, c.classifyProposal(ctx, id, err)
	}
	return st, nil
}
