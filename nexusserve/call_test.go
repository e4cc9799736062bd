package nexusserve

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/workflows"
)

// newEnv is a test environment with the call workflow and mockable
// activities registered under their names.
func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Call, workflow.RegisterOptions{Name: CallWorkflow})
	a := &activities{}
	env.RegisterActivityWithOptions(a.propose, activityOpts(ActivityPropose))
	env.RegisterActivityWithOptions(a.await, activityOpts(ActivityAwait))
	env.RegisterActivityWithOptions(a.withdraw, activityOpts(ActivityWithdraw))
	return env
}

var closeReq = CallRequest{Run: "nexus-a", Proposal: workflows.Proposal{Tool: "close_ticket", Args: json.RawMessage(`{"ticket_id":"TKT-3"}`), Key: "k-1"}}

func waiting() workflows.CallStatus {
	return workflows.CallStatus{ExternalCall: workflows.ExternalCall{CallID: "c-3", Key: "k-1", Tool: "close_ticket"},
		Waiting: &workflows.Interrupt{CallID: "c-3", Tool: "close_ticket"}}
}

func ended(status, result, errText string) workflows.CallStatus {
	return workflows.CallStatus{ExternalCall: workflows.ExternalCall{CallID: "c-3", Key: "k-1", Tool: "close_ticket", Done: true,
		Status: status, Result: json.RawMessage(result), Error: errText}}
}

// A call that waits is watched until it has run; the answer is its outcome.
func TestCallWaitsForItsOutcome(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(ActivityPropose, mock.Anything, closeReq).Return(waiting(), nil).Once()
	env.OnActivity(ActivityAwait, mock.Anything, CallRef{Run: "nexus-a", CallID: "c-3", Key: "k-1"}).Return(waiting(), nil).Once()
	env.OnActivity(ActivityAwait, mock.Anything, mock.Anything).Return(ended("ok", `{"id":"TKT-3","status":"closed"}`, ""), nil).Once()
	env.ExecuteWorkflow(CallWorkflow, closeReq)
	require.NoError(t, env.GetWorkflowError())
	var out CallOutput
	require.NoError(t, env.GetWorkflowResult(&out))
	require.Equal(t, CallOutput{Run: "nexus-a", CallID: "c-3", Tool: "close_ticket", Status: "ok", Result: json.RawMessage(`{"id":"TKT-3","status":"closed"}`)}, out)
	require.True(t, out.OK())
	env.AssertExpectations(t)
}

// A call that ended at once (a read, an attached call) is answered without
// a watch; a proposal refused fails the workflow, saying why.
func TestCallEndedAtOnceOrRefused(t *testing.T) {
	env := newEnv(t)
	st := ended("rejected", "", "not executed: rejected by bob: wrong ticket")
	st.Attached = true
	env.OnActivity(ActivityPropose, mock.Anything, closeReq).Return(st, nil).Once()
	env.ExecuteWorkflow(CallWorkflow, closeReq)
	var out CallOutput
	require.NoError(t, env.GetWorkflowResult(&out))
	require.Equal(t, "rejected", out.Status)
	require.True(t, out.Attached)
	require.False(t, out.OK())
	require.Equal(t, "not executed: rejected by bob: wrong ticket", out.Error)

	env = newEnv(t)
	env.OnActivity(ActivityPropose, mock.Anything, closeReq).Return(workflows.CallStatus{},
		temporal.NewNonRetryableApplicationError("proposal refused: run nexus-a has ended", RefusedType, nil)).Once()
	env.ExecuteWorkflow(CallWorkflow, closeReq)
	err := env.GetWorkflowError()
	require.ErrorContains(t, err, "run nexus-a has ended")
}

// Cancelled while its call waits, the workflow withdraws the call and ends
// cancelled.
func TestCancelWithdraws(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(ActivityPropose, mock.Anything, closeReq).Return(waiting(), nil).Once()
	env.OnActivity(ActivityAwait, mock.Anything, mock.Anything).After(time.Hour).Return(waiting(), nil).Maybe()
	var withdrawn CallRef
	env.OnActivity(ActivityWithdraw, mock.Anything, mock.Anything).Return(func(_ context.Context, ref CallRef) (Withdrawal, error) {
		withdrawn = ref
		return Withdrawal{Withdrawn: true, Call: ended("cancelled", "", "not executed: cancelled by (caller): withdrawn")}, nil
	}).Once()
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(CallWorkflow, closeReq)
	err := env.GetWorkflowError()
	var canceled *temporal.CanceledError
	require.True(t, errors.As(err, &canceled), "%v", err)
	require.Equal(t, CallRef{Run: "nexus-a", CallID: "c-3", Key: "k-1", Reason: "the caller cancelled its Nexus operation"}, withdrawn)
	env.AssertExpectations(t)
}

// Cancelled once its call was decided (it runs), the workflow does not undo
// it: it waits for the outcome and answers it.
func TestCancelAfterTheDecisionAnswersTheOutcome(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(ActivityPropose, mock.Anything, closeReq).Return(waiting(), nil).Once()
	env.OnActivity(ActivityAwait, mock.Anything, mock.Anything).After(time.Hour).Return(waiting(), nil).Once()
	env.OnActivity(ActivityWithdraw, mock.Anything, mock.Anything).Return(Withdrawal{Call: workflows.CallStatus{ExternalCall: workflows.ExternalCall{CallID: "c-3"}},
		Why: "call c-3 is not waiting for a human"}, nil).Once()
	env.OnActivity(ActivityAwait, mock.Anything, mock.Anything).Return(ended("ok", `{"id":"TKT-3","status":"closed"}`, ""), nil).Once()
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(CallWorkflow, closeReq)
	var out CallOutput
	require.NoError(t, env.GetWorkflowResult(&out))
	require.Equal(t, "ok", out.Status)
	env.AssertExpectations(t)
}

func activityOpts(name string) activity.RegisterOptions { return activity.RegisterOptions{Name: name} }
