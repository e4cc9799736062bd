package workflows_test

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/workflows"
)

// proposeFor proposes a call naming waiter as its waiter.
func (f *fixture) proposeFor(waiter, toolName, args, key string) *outcome[workflows.CallStatus] {
	return sendUpdate[workflows.CallStatus](f, workflows.UpdatePropose,
		workflows.Proposal{Tool: toolName, Args: json.RawMessage(args), Key: key, Notify: waiter})
}

// told records the run's SignalCallEnded signals ("waiter call-id"), and
// returns what it recorded so far, sorted: the test environment delivers
// each signal on a goroutine of its own.
func (f *fixture) told() func() []string {
	var (
		mu  sync.Mutex
		got []string
	)
	f.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", workflows.SignalCallEnded, mock.Anything).Return(
		func(_, id, _, _ string, arg any) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, id+" "+arg.(string))
			return nil
		})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(slices.Values(got))
	}
}

// A call's waiters are signalled once when it ends — each waiter that
// attached too, never twice, and none of a call that ended at once; a
// waiter that is not a call's is refused with why.
func TestACallTellsItsWaitersWhenItEnds(t *testing.T) {
	f := newFixture(t)
	got := f.told()
	const closeArgs = `{"ticket_id":"TKT-3"}`
	var first, second, again, read, stranger *outcome[workflows.CallStatus]
	var atApproval []string
	f.at(time.Second, func() {
		first = f.proposeFor("toolgate-call-a", "close_ticket", closeArgs, "k-1")
		second = f.proposeFor("toolgate-call-b", "close_ticket", closeArgs, "k-1")
		again = f.proposeFor("toolgate-call-a", "close_ticket", closeArgs, "k-1")
		read = f.proposeFor("toolgate-call-r", "search_tickets", `{"query":"login"}`, "")
		stranger = f.proposeFor("payroll-run-7", "close_ticket", closeArgs, "k-1")
	})
	f.at(2*time.Second, func() {
		atApproval = got()
		f.approve("c-1")
	})
	f.at(3*time.Second, func() { f.env.SignalWorkflow(workflows.SignalEnd, nil) })
	res := f.run(external())
	require.Equal(t, workflows.StatusCompleted, res.Status)
	for _, o := range []*outcome[workflows.CallStatus]{first, second, again} {
		require.NoError(t, o.err)
		require.True(t, o.result.Notifies, "%+v", o.result)
		require.Equal(t, "c-1", o.result.CallID)
	}
	require.NoError(t, read.err)
	require.True(t, read.result.Done)
	require.False(t, read.result.Notifies, "a call that ended at once tells no one")
	require.ErrorContains(t, stranger.err, `notify "payroll-run-7" is not the id of a call's waiter`)
	require.Equal(t, workflows.RefusedInput, failureType(t, stranger.err))
	require.Empty(t, atApproval, "no waiter is told before the call ends")
	require.Equal(t, []string{"toolgate-call-a c-1", "toolgate-call-b c-1"}, got())
	require.Equal(t, 1, f.desk.closed["TKT-3"])
}

// A waiting call carries its waiters across continue-as-new, and the next
// run tells them when the call ends.
func TestAParkedCallTellsItsWaitersFromTheNextRun(t *testing.T) {
	f := newFixture(t)
	var got func() []string
	res, inputs := runToEnd(t, f, external(), func(run int, f *fixture) {
		got = f.told()
		switch run {
		case 0:
			f.at(time.Second, func() { f.proposeFor("toolgate-call-a", "close_ticket", `{"ticket_id":"TKT-3"}`, "k") })
			f.at(2*time.Second, func() {
				f.env.SetContinueAsNewSuggested(true)
				f.env.SignalWorkflow(workflows.SignalMessage, workflows.MessageInput{Text: "wake up"})
			})
		case 1:
			f.at(time.Second, func() { f.approve("c-1") })
			f.at(2*time.Second, func() { f.env.SignalWorkflow(workflows.SignalEnd, nil) })
		}
	})
	require.Len(t, inputs, 2)
	require.Equal(t, []string{"toolgate-call-a"}, inputs[1].Carry.External[0].Notify)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, []string{"toolgate-call-a c-1"}, got(), "the next run told the waiter")
}
