package workflows_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// A worker of one's own that answers a run's workflow task may continue the
// run as new with any state it likes: here the waiting refund, parked,
// marked approved by bob and carol, with no signed approval. The real worker
// takes the run up and would pay on the run's word; the worker that signs
// the refund's permit verifies the decision against its own policy, finds
// no signed approval of this call, and signs nothing.
func TestAForgedCarryGetsNoPermit(t *testing.T) {
	s := newSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	f.at(time.Minute, func() {
		f.env.SetContinueAsNewSuggested(true)
		f.env.SignalWorkflow(workflows.SignalApprove, json.RawMessage(`{}`)) // wakes the run, which parks the waiting refund
	})
	f.env.ExecuteWorkflow(workflows.WorkflowName, scripted(steps(refundCall(60000, ""))))
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(f.env.GetWorkflowError(), &can), "the run continues as new with the refund parked: %v", f.env.GetWorkflowError())
	var in workflows.RunInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &in))
	require.Len(t, in.Carry.Parked, 1)

	// The forgery: decided, approved by bob and carol, at the gate.
	w := &in.Carry.Parked[0].Wait
	w.Decided, w.By, w.ApprovedBy = true, "bob, carol", []string{"bob", "carol"}
	w.Approval = &tool.Approval{Approver: "bob, carol", Kind: tool.ApprovedAtGate}

	next := bareFixture(t, f.desk)
	next.opts, next.ledger, next.claims = f.opts, f.ledger, f.claims
	require.NoError(t, registerOn(next, next.desk, next.opts...))
	next.continued()
	res := next.run(in)
	require.Empty(t, next.desk.payments, "nothing paid on a forged approval")
	require.Equal(t, workflows.TraceError, res.Trace[len(res.Trace)-1].Status)
	require.Contains(t, res.Trace[len(res.Trace)-1].Error, "carries 0 signed approval(s) of this call by approvers of this worker's own policy, and the policy needs 2")
}
