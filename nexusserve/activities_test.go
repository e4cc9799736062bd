package nexusserve

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/workflows"
)

// fakeRuns answers Call with the statuses in turn (the last again), and
// Propose and Withdraw with what it is given.
type fakeRuns struct {
	mu        sync.Mutex
	calls     []workflows.CallStatus
	callErrs  []error
	looks     int
	proposed  []workflows.Proposal
	propose   error
	withdraw  error
	withdrawn []string
}

func (f *fakeRuns) Propose(_ context.Context, id string, _ *workflows.RunInput, p workflows.Proposal, _ ...client.StartOption) (workflows.CallStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.proposed = append(f.proposed, p)
	return waiting(), f.propose
}

func (f *fakeRuns) Call(context.Context, string, string) (workflows.CallStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := min(f.looks, len(f.calls)-1)
	f.looks++
	var err error
	if i < len(f.callErrs) {
		err = f.callErrs[i]
	}
	return f.calls[i], err
}

func (f *fakeRuns) Withdraw(_ context.Context, id, callID, key, reason string) (workflows.CallStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.withdrawn = append(f.withdrawn, id+" "+callID+" "+key+" "+reason)
	return ended("cancelled", "", ""), f.withdraw
}

func activityEnv(runs Runs, window time.Duration) (*testsuite.TestActivityEnvironment, *activities) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	a := &activities{runs: runs, window: window, poll: time.Millisecond}
	env.RegisterActivityWithOptions(a.propose, activityOpts(ActivityPropose))
	env.RegisterActivityWithOptions(a.await, activityOpts(ActivityAwait))
	env.RegisterActivityWithOptions(a.withdraw, activityOpts(ActivityWithdraw))
	return env, a
}

var ref = CallRef{Run: "nexus-a", CallID: "c-3", Key: "k-1"}

// await looks until the call has ended (a query that fails is tried again);
// within its window it answers the call unfinished.
func TestAwait(t *testing.T) {
	runs := &fakeRuns{calls: []workflows.CallStatus{waiting(), waiting(), ended("ok", `{}`, "")}, callErrs: []error{nil, errors.New("connection reset")}}
	env, _ := activityEnv(runs, time.Minute)
	v, err := env.ExecuteActivity(ActivityAwait, ref)
	require.NoError(t, err)
	var st workflows.CallStatus
	require.NoError(t, v.Get(&st))
	require.True(t, st.Done)
	require.Equal(t, 3, runs.looks)

	runs = &fakeRuns{calls: []workflows.CallStatus{waiting()}}
	env, _ = activityEnv(runs, 20*time.Millisecond)
	v, err = env.ExecuteActivity(ActivityAwait, ref)
	require.NoError(t, err)
	var unfinished workflows.CallStatus
	require.NoError(t, v.Get(&unfinished))
	require.False(t, unfinished.Done, "unfinished at the window's end")
	require.Equal(t, "c-3", unfinished.CallID)
	require.Greater(t, runs.looks, 1)
}

// A refusal is not retried: the run is gone, the call unknown, the input
// refused. Busy is retried.
func TestRefusalsAreNotRetried(t *testing.T) {
	for _, c := range []struct {
		err       error
		retryable bool
	}{
		{&client.Error{Kind: client.ErrRunClosed, Msg: "run nexus-a has terminated"}, false},
		{&client.Error{Kind: client.ErrUnknownCall, Msg: "no call c-3"}, false},
		{&client.Error{Kind: client.ErrRefusedInput, Msg: "proposal refused"}, false},
		{&client.Error{Kind: client.ErrBusy, Msg: "busy"}, true},
		{errors.New("connection refused"), true},
	} {
		runs := &fakeRuns{calls: []workflows.CallStatus{waiting()}, propose: c.err}
		env, _ := activityEnv(runs, time.Minute)
		_, err := env.ExecuteActivity(ActivityPropose, closeReq)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr, "%v", c.err)
		require.Equal(t, c.retryable, !appErr.NonRetryable(), "%v", c.err)
		require.ErrorContains(t, err, c.err.Error())
	}
	runs := &fakeRuns{calls: []workflows.CallStatus{waiting()}, callErrs: []error{&client.Error{Kind: client.ErrRunClosed, Msg: "run nexus-a has terminated"}}}
	env, _ := activityEnv(runs, time.Minute)
	_, err := env.ExecuteActivity(ActivityAwait, ref)
	require.ErrorContains(t, err, "run nexus-a has terminated")
	require.Equal(t, 1, runs.looks, "a closed run is not asked again")
}

// withdraw withdraws, or answers why not with the call as it stands.
func TestWithdrawActivity(t *testing.T) {
	runs := &fakeRuns{calls: []workflows.CallStatus{waiting()}}
	env, _ := activityEnv(runs, time.Minute)
	r := ref
	r.Reason = "cancelled"
	v, err := env.ExecuteActivity(ActivityWithdraw, r)
	require.NoError(t, err)
	var w Withdrawal
	require.NoError(t, v.Get(&w))
	require.True(t, w.Withdrawn)
	require.Equal(t, []string{"nexus-a c-3 k-1 cancelled"}, runs.withdrawn)

	runs = &fakeRuns{calls: []workflows.CallStatus{ended("ok", `{}`, "")}, withdraw: &client.Error{Kind: client.ErrAlreadyDecided, Msg: "call c-3 has already ended ok"}}
	env, _ = activityEnv(runs, time.Minute)
	v, err = env.ExecuteActivity(ActivityWithdraw, ref)
	require.NoError(t, err)
	require.NoError(t, v.Get(&w))
	require.False(t, w.Withdrawn)
	require.True(t, w.Call.Done)
	require.Equal(t, "call c-3 has already ended ok", w.Why)
}

// Under a policy, a call without a start to a run that is not running is
// refused, saying to sign one; to a running run it is proposed.
func TestProposeNeedsASignedStart(t *testing.T) {
	req := closeReq
	req.NeedsSignedStart = true
	for _, gone := range []error{&client.Error{Kind: client.ErrUnknownRun, Msg: "no run nexus-a"}, &client.Error{Kind: client.ErrRunClosed, Msg: "run nexus-a has completed"}} {
		runs := &fakeRuns{calls: []workflows.CallStatus{waiting()}, propose: gone}
		env, _ := activityEnv(runs, time.Minute)
		_, err := env.ExecuteActivity(ActivityPropose, req)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		require.True(t, appErr.NonRetryable())
		require.ErrorContains(t, err, "toolgate nexus sign-start --run a --as NAME")
		require.ErrorContains(t, err, gone.Error())
	}
	runs := &fakeRuns{calls: []workflows.CallStatus{waiting()}}
	env, _ := activityEnv(runs, time.Minute)
	_, err := env.ExecuteActivity(ActivityPropose, req)
	require.NoError(t, err)
	require.Len(t, runs.proposed, 1)
}

// A proposal names its waiter only to a run of the call workflow's own
// namespace: a signal cannot cross namespaces, so across them the waiter
// is left out and the workflow watches instead.
func TestAWaiterIsNamedOnlyInItsOwnNamespace(t *testing.T) {
	for _, c := range []struct {
		runsNamespace, want string
	}{{"default-test-namespace", "toolgate-call-x"}, {"other", ""}} { // the test environment's namespace, and another
		runs := &fakeRuns{}
		env, a := activityEnv(runs, time.Second)
		a.namespace = c.runsNamespace
		req := closeReq
		req.Proposal.Notify = "toolgate-call-x"
		_, err := env.ExecuteActivity(ActivityPropose, req)
		require.NoError(t, err)
		require.Len(t, runs.proposed, 1)
		require.Equal(t, c.want, runs.proposed[0].Notify, "runs in namespace %q", c.runsNamespace)
	}
}
