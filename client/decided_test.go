package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/toolgate/toolgate/workflows"
)

// A refusal for a call that waits no more says how the trace last decided
// it: by whom and when, by no one (an allow rule), or that it expired.
func TestDecidedAlreadySaysWhoAndWhen(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	trace := []workflows.TraceRecord{
		{CallID: "c-1", Tool: "close_ticket", Status: workflows.TraceBlocked, At: at},
		{CallID: "c-1", Tool: "close_ticket", Status: workflows.TraceApproved, Approver: "alice", At: at},
		{CallID: "c-1", Tool: "close_ticket", Status: workflows.TraceOK, At: at.Add(time.Second)},
		{CallID: "c-2", Tool: "refund", Status: workflows.TraceExpired, At: at},
		{CallID: "c-3", Tool: "search_tickets", Status: workflows.TraceRejected, At: at},
		{CallID: "c-4", Tool: "search_tickets", Status: workflows.TraceOK, At: at},
	}
	for call, want := range map[string]string{
		"c-1": "c-1 (close_ticket) was decided already by alice at 2026-01-02T03:04:05Z (approved): nothing more to do",
		"c-2": "c-2 (refund) expired at 2026-01-02T03:04:05Z, waiting for a decision: nothing decides it any more",
		"c-3": "c-3 (search_tickets) was decided already at 2026-01-02T03:04:05Z (rejected): nothing more to do",
	} {
		r, ok := lastDecision(trace, call)
		if assert.True(t, ok, call) {
			assert.Equal(t, want, decidedAlready(r))
		}
	}
	_, ok := lastDecision(trace, "c-4")
	assert.False(t, ok, "a call no one decided")
}
