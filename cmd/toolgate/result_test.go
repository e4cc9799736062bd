package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/workflows"
)

// A run's end is its exit code: a completed run none of whose calls ran
// exits 3, naming them and why; one that ran a call, or made none, exits 0.
func TestACompletedRunWhoseCallsAllFailedExitsThree(t *testing.T) {
	code := func(res workflows.RunResult) (int, string) {
		err := resultError(res)
		if err == nil {
			return 0, ""
		}
		var ee *exitError
		require.True(t, errors.As(err, &ee), "%v", err)
		return ee.code, err.Error()
	}
	failed := workflows.RunResult{Status: workflows.StatusCompleted, Trace: []workflows.TraceRecord{
		{Seq: 1, CallID: "c-1", Tool: "search_tickets", Status: workflows.TraceError, Error: "the desk is down"},
		{Seq: 2, CallID: "c-2", Tool: "close_ticket", Status: workflows.TraceBlocked},
		{Seq: 3, CallID: "c-2", Tool: "close_ticket", Status: workflows.TraceRejected, Error: "not executed: rejected by bob: wrong ticket"},
	}}
	n, msg := code(failed)
	assert.Equal(t, 3, n)
	assert.Equal(t, "the run completed, but none of its 2 calls ran: c-1 search_tickets error: the desk is down; "+
		"c-2 close_ticket rejected: not executed: rejected by bob: wrong ticket (toolgate trace ID shows each)", msg)

	ran := failed
	ran.Trace = append(ran.Trace, workflows.TraceRecord{Seq: 4, CallID: "c-3", Tool: "search_tickets", Status: workflows.TraceCacheHit})
	n, _ = code(ran)
	assert.Zero(t, n, "a call answered from the memo ran")
	n, _ = code(workflows.RunResult{Status: workflows.StatusCompleted, Answer: "nothing to do"})
	assert.Zero(t, n, "no call")
	n, _ = code(workflows.RunResult{Status: workflows.StatusFailed, Error: "planner: boom"})
	assert.Equal(t, 1, n)
}
