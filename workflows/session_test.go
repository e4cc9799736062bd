package workflows_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// A session's memo is shared by all its turns: turn 2 is served from turn 1.
func TestSessionSharesTheMemoAcrossTurns(t *testing.T) {
	f := newFixture(t)
	in := scripted(
		steps(call("search_tickets", `{"query":"login"}`)), steps(),
		steps(call("search_tickets", `{"query":"login"}`)), steps(),
	)
	in.Session = true
	f.at(time.Minute, func() {
		s := f.state()
		require.Equal(t, workflows.StatusWaitingForInput, s.Status)
		require.Equal(t, 1, s.Turn)
		require.Equal(t, "done", s.Answer)
		f.env.SignalWorkflow(workflows.SignalMessage, workflows.MessageInput{Text: "is it still there?"})
	})
	f.at(2*time.Minute, func() {
		s := f.state()
		require.Equal(t, workflows.StatusWaitingForInput, s.Status)
		require.Equal(t, 2, s.Turn)
		f.env.SignalWorkflow(workflows.SignalEnd, nil) // a payload-less end, as `temporal workflow signal --name end` sends it
	})
	start := f.env.Now()
	res := f.run(in)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, 2*time.Minute, f.env.Now().Sub(start), "ended by the end signal, not by idle_timeout")
	require.Empty(t, f.state().Refused)
	require.Equal(t, 1, f.desk.count("search_tickets"))
	require.Equal(t, []string{"c-1:search_tickets:ok", "c-2:search_tickets:cache_hit"}, statuses(res.Trace))
	require.Equal(t, 1, res.Trace[0].Turn)
	require.Equal(t, 2, res.Trace[1].Turn)
}

func TestSessionEndsWhenIdle(t *testing.T) {
	f := newFixture(t)
	in := scripted(steps(call("search_tickets", `{"query":"login"}`)))
	in.Session = true
	in.IdleTimeout = workflows.Duration(time.Hour)
	f.at(59*time.Minute, func() { require.Equal(t, workflows.StatusWaitingForInput, f.state().Status) })
	start := f.env.Now()
	res := f.run(in)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, time.Hour, f.env.Now().Sub(start), "ended exactly when idle_timeout ran out, in workflow time")
}

// runToEnd runs in, following continue-as-new (the test environment stops
// at it) with fresh environments over the same desk, and returns every run's input.
func runToEnd(t *testing.T, f *fixture, in workflows.RunInput, beforeEach func(run int, f *fixture)) (workflows.RunResult, []workflows.RunInput) {
	t.Helper()
	var inputs []workflows.RunInput
	for run := 0; run < 100; run++ {
		inputs = append(inputs, in)
		if beforeEach != nil {
			beforeEach(run, f)
		}
		f.env.ExecuteWorkflow(workflows.WorkflowName, in)
		require.True(t, f.env.IsWorkflowCompleted())
		err := f.env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if errors.As(err, &can) {
			require.Equal(t, workflows.WorkflowName, can.WorkflowType.Name)
			in = workflows.RunInput{}
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &in))
			// The next run is on a worker like the last: same tools, policy,
			// fleet ledger and permit claims.
			next := bareFixture(t, f.desk)
			next.opts, next.ledger, next.claims = f.opts, f.ledger, f.claims
			require.NoError(t, registerOn(next, next.desk, next.opts...))
			f = next
			f.continued()
			continue
		}
		require.NoError(t, err)
		var res workflows.RunResult
		require.NoError(t, f.env.GetWorkflowResult(&res))
		return res, inputs
	}
	t.Fatal("the run never finished")
	return workflows.RunResult{}, nil
}

func TestContinueAsNewCarriesMemoCallIDsAndTrace(t *testing.T) {
	f := newFixture(t)
	var turns [][]tool.Proposal
	for i := 0; i < 12; i++ {
		q := []string{"a", "b", "c"}[i%3]
		turns = append(turns, steps(call("search_tickets", `{"query":"`+q+`"}`)))
	}
	in := scripted(turns...)
	in.HistoryLimit = 500
	res, inputs := runToEnd(t, f, in, func(run int, f *fixture) {
		// The test environment keeps no real history: say it is long.
		// (Real histories are exercised end to end under testsuite/.)
		f.env.SetCurrentHistoryLength(500 + run)
	})
	require.Equal(t, 13, len(inputs), "each run makes one step of progress (12 searches, then the answer), then continues as new")
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, 3, f.desk.count("search_tickets"), "only the first of each query ran, across runs")
	require.Len(t, res.Trace, 12)
	for i, r := range res.Trace {
		require.Equal(t, i+1, r.Seq)
		require.Equal(t, "c-"+itoa(i+1), r.CallID, "call ids go on across runs")
	}
	carried := inputs[len(inputs)-1].Carry
	require.NotNil(t, carried)
	require.Len(t, carried.Memo, 3)
}

// Messages and the end signal that arrived before the run continues as new
// are carried to the next run, not lost.
func TestContinueAsNewCarriesQueuedMessages(t *testing.T) {
	f := newFixture(t)
	in := scripted(
		steps(call("search_tickets", `{"query":"a"}`)), steps(),
		steps(call("search_tickets", `{"query":"b"}`)), steps(),
		steps(call("search_tickets", `{"query":"a"}`)), steps(),
	)
	in.Session = true
	res, inputs := runToEnd(t, f, in, func(run int, f *fixture) {
		if run != 0 {
			return
		}
		f.at(time.Minute, func() {
			f.env.SignalWorkflow(workflows.SignalMessage, workflows.MessageInput{Text: "second"})
			f.env.SignalWorkflow(workflows.SignalMessage, workflows.MessageInput{Text: "third"})
			f.env.SignalWorkflow(workflows.SignalEnd, struct{}{})
		})
		// Temporal suggests continuing as new while turn 2's search runs.
		f.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
			if info.ActivityType.Name == "search_tickets" && info.ActivityID == "c-2" {
				f.env.SetContinueAsNewSuggested(true)
			}
		})
	})
	require.Equal(t, 2, len(inputs), "the run continued as new once")
	carried := inputs[1].Carry
	require.Equal(t, []string{"third"}, carried.Messages)
	require.True(t, carried.Ended)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, []string{"c-1:search_tickets:ok", "c-2:search_tickets:ok", "c-3:search_tickets:cache_hit"}, statuses(res.Trace))
	require.Equal(t, []int{1, 2, 3}, []int{res.Trace[0].Turn, res.Trace[1].Turn, res.Trace[2].Turn})
}

func itoa(i int) string { return strconv.Itoa(i) }
