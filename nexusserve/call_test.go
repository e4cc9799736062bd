package nexusserve

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
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
	env.RegisterActivityWithOptions(a.look, activityOpts(ActivityLook))
	return env
}

// testWorkflowID is the id the test environment gives the workflow.
const testWorkflowID = "default-test-workflow-id"

// told is req as the call workflow proposes it: naming itself the waiter.
func told(req CallRequest) CallRequest {
	req.Proposal.Notify = testWorkflowID
	return req
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
	env.OnActivity(ActivityPropose, mock.Anything, told(closeReq)).Return(waiting(), nil).Once()
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
	env.OnActivity(ActivityPropose, mock.Anything, told(closeReq)).Return(st, nil).Once()
	env.ExecuteWorkflow(CallWorkflow, closeReq)
	var out CallOutput
	require.NoError(t, env.GetWorkflowResult(&out))
	require.Equal(t, "rejected", out.Status)
	require.True(t, out.Attached)
	require.False(t, out.OK())
	require.Equal(t, "not executed: rejected by bob: wrong ticket", out.Error)

	env = newEnv(t)
	env.OnActivity(ActivityPropose, mock.Anything, told(closeReq)).Return(workflows.CallStatus{},
		temporal.NewNonRetryableApplicationError("proposal refused: run nexus-a has ended", RefusedType, nil)).Once()
	env.ExecuteWorkflow(CallWorkflow, closeReq)
	err := env.GetWorkflowError()
	require.ErrorContains(t, err, "run nexus-a has ended")
}

// Cancelled while its call waits, the workflow withdraws the call and ends
// cancelled.
func TestCancelWithdraws(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(ActivityPropose, mock.Anything, told(closeReq)).Return(waiting(), nil).Once()
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
	env.OnActivity(ActivityPropose, mock.Anything, told(closeReq)).Return(waiting(), nil).Once()
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

// A call workflow that began before the run could tell it (version
// DefaultVersion of "call-told") proposes without a waiter and watches with
// Await activities, as it did.
func TestACallOfTheOldVersionWatches(t *testing.T) {
	env := newEnv(t)
	env.OnGetVersion(toldVersion, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.OnActivity(ActivityPropose, mock.Anything, closeReq).Return(waiting(), nil).Once()
	env.OnActivity(ActivityAwait, mock.Anything, mock.Anything).Return(ended("ok", `{"id":"TKT-3","status":"closed"}`, ""), nil).Once()
	env.ExecuteWorkflow(CallWorkflow, closeReq)
	var out CallOutput
	require.NoError(t, env.GetWorkflowResult(&out))
	require.Equal(t, "ok", out.Status)
	env.AssertExpectations(t)
}

// What a call that the run tells of does while it waits, counted.
type waitCount struct {
	activities, looks, timers int
}

// eventsPerLook is what one look of the call workflow's own adds to its
// history: the timer fired, a workflow task (scheduled, started, completed),
// the local activity's marker, the next timer started.
// TestNexusCallWaitingAddsNoEvents (testsuite/e2e) counts it on a real
// server's history.
const eventsPerLook = 6

// waitAWeek runs one call workflow whose run will tell it: the call waits a
// week (skipped time), then the run signals that it ended. It counts what
// the workflow did in that week, and returns its answer.
func waitAWeek(t *testing.T) (waitCount, CallOutput) {
	t.Helper()
	const week = 7 * 24 * time.Hour
	env := newEnv(t)
	st := waiting()
	st.Notifies = true
	env.OnActivity(ActivityPropose, mock.Anything, told(closeReq)).Return(st, nil).Once()
	var n waitCount
	var signalled atomic.Bool // set by the test's callback, read by the look's goroutine
	env.OnActivity(ActivityLook, mock.Anything, CallRef{Run: "nexus-a", CallID: "c-3", Key: "k-1"}).Return(func(context.Context, CallRef) (workflows.CallStatus, error) {
		if signalled.Load() {
			return ended("ok", `{"id":"TKT-3","status":"closed"}`, ""), nil
		}
		return waiting(), nil
	})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name != ActivityPropose {
			n.activities++
		}
	})
	env.SetOnLocalActivityStartedListener(func(*activity.Info, context.Context, []any) {
		if !signalled.Load() {
			n.looks++
		}
	})
	env.SetOnTimerFiredListener(func(string) {
		if !signalled.Load() {
			n.timers++
		}
	})
	env.RegisterDelayedCallback(func() {
		signalled.Store(true)
		env.SignalWorkflow(workflows.SignalCallEnded, "c-3")
	}, week)
	env.ExecuteWorkflow(CallWorkflow, closeReq)
	var out CallOutput
	require.NoError(t, env.GetWorkflowResult(&out))
	return n, out
}

// 1,000 calls that the run will tell of wait a week each (time skipping):
// none runs an activity while it waits, and each looks once of its own
// (RecheckEvery) — fewer than 10 events of history a call in the week —
// and answers the call's outcome once told.
func TestCallsTheRunTellsOfPollNothingForAWeek(t *testing.T) {
	const calls = 1000
	most := 0
	for i := range calls {
		n, out := waitAWeek(t)
		require.Equal(t, "ok", out.Status, "call %d", i)
		require.Zero(t, n.activities, "call %d ran an activity while it waited", i)
		require.Equal(t, n.looks, n.timers, "call %d looked other than on its recheck", i)
		most = max(most, n.looks*eventsPerLook)
	}
	require.Less(t, most, 10, "events of history a call adds in a week of waiting, at most")
	t.Logf("%d calls waited a week each: at most %d events each while waiting (%d looks of their own at most)", calls, most, most/eventsPerLook)
}

// A signal anyone may send (the run's, or a forged one) is no answer: the
// workflow looks, finds the call waiting, and waits on.
func TestASignalIsOnlyACueToLook(t *testing.T) {
	env := newEnv(t)
	st := waiting()
	st.Notifies = true
	env.OnActivity(ActivityPropose, mock.Anything, told(closeReq)).Return(st, nil).Once()
	env.OnActivity(ActivityLook, mock.Anything, mock.Anything).Return(waiting(), nil).Once()
	env.OnActivity(ActivityLook, mock.Anything, mock.Anything).Return(ended("rejected", "", "not executed: rejected by bob"), nil).Once()
	env.RegisterDelayedCallback(func() {
		for range 5 { // a burst: one look
			env.SignalWorkflow(workflows.SignalCallEnded, "c-3")
		}
	}, time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.SignalCallEnded, "c-3") }, time.Hour)
	env.ExecuteWorkflow(CallWorkflow, closeReq)
	var out CallOutput
	require.NoError(t, env.GetWorkflowResult(&out))
	require.Equal(t, "rejected", out.Status)
	env.AssertExpectations(t)
}

// Cancelled while it waits to be told, the workflow withdraws the call.
func TestCancelWithdrawsACallTheRunTellsOf(t *testing.T) {
	env := newEnv(t)
	st := waiting()
	st.Notifies = true
	env.OnActivity(ActivityPropose, mock.Anything, told(closeReq)).Return(st, nil).Once()
	env.OnActivity(ActivityWithdraw, mock.Anything, mock.Anything).Return(
		Withdrawal{Withdrawn: true, Call: ended("cancelled", "", "not executed: cancelled by (caller): withdrawn")}, nil).Once()
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(CallWorkflow, closeReq)
	var canceled *temporal.CanceledError
	require.True(t, errors.As(env.GetWorkflowError(), &canceled), "%v", env.GetWorkflowError())
	env.AssertExpectations(t)
}
