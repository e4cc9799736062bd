package workflows_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/toolgate/toolgate/workflows"
)

// A rewind request names a run and a reset id: without either it is
// refused before any worker acts; with both, the worker's local activity
// carries it out once and the request returns the run the reset made, or
// the activity's refusal, not retried.
func TestARewindRequestIsCarriedOutByTheWorkersActivity(t *testing.T) {
	reset := strings.Repeat("ab", 16)
	run := func(req workflows.RewindRequest, act func(context.Context, workflows.RewindRequest) (workflows.RewindDone, error)) (workflows.RewindDone, int, error) {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		calls := 0
		env.RegisterActivityWithOptions(func(ctx context.Context, r workflows.RewindRequest) (workflows.RewindDone, error) {
			calls++
			return act(ctx, r)
		}, activity.RegisterOptions{Name: workflows.RewindActivity})
		env.ExecuteWorkflow(workflows.Rewind, req)
		require.True(t, env.IsWorkflowCompleted())
		var done workflows.RewindDone
		err := env.GetWorkflowError()
		if err == nil {
			require.NoError(t, env.GetWorkflowResult(&done))
		}
		return done, calls, err
	}
	never := func(context.Context, workflows.RewindRequest) (workflows.RewindDone, error) {
		t.Fatal("the activity ran for a request refused")
		return workflows.RewindDone{}, nil
	}
	for name, req := range map[string]workflows.RewindRequest{
		"no run":        {Note: workflows.RewindNote{Reset: reset}},
		"no reset id":   {WorkflowID: "run-1"},
		"a bad reset":   {WorkflowID: "run-1", Note: workflows.RewindNote{Reset: "reset-of-my-own"}},
		"a long run id": {WorkflowID: strings.Repeat("r", workflows.MaxNameBytes+1), Note: workflows.RewindNote{Reset: reset}},
	} {
		_, _, err := run(req, never)
		require.ErrorContains(t, err, "rewind request refused", name)
	}

	done, calls, err := run(workflows.RewindRequest{WorkflowID: "run-1", Note: workflows.RewindNote{Reset: reset}},
		func(_ context.Context, r workflows.RewindRequest) (workflows.RewindDone, error) {
			require.Equal(t, "run-1", r.WorkflowID)
			return workflows.RewindDone{RunID: "new-run"}, nil
		})
	require.NoError(t, err)
	require.Equal(t, "new-run", done.RunID)
	require.Equal(t, 1, calls)

	_, calls, err = run(workflows.RewindRequest{WorkflowID: "run-1", Note: workflows.RewindNote{Reset: reset}},
		func(context.Context, workflows.RewindRequest) (workflows.RewindDone, error) {
			return workflows.RewindDone{}, temporal.NewNonRetryableApplicationError("rewind refused by run run-1: dave holds no operators role", workflows.RefusedUnauthorized, nil)
		})
	require.ErrorContains(t, err, "dave holds no operators role")
	require.Equal(t, 1, calls, "a refusal is not retried")
}
