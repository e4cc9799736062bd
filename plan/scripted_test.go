package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A script's answer is given only when every call of the turn ran; when one
// did not, the answer says which and why, and claims nothing of the script's.
func TestAScriptedAnswerClaimsOnlyWhatHappened(t *testing.T) {
	cfg := Config{Kind: KindScripted, Answer: "Closed TKT-3 after approval."}
	ran := []Entry{
		{Role: RoleUser, Text: "close the login ticket"},
		{Role: RoleTool, CallID: "c-1", Tool: "search_tickets", Status: StatusOK},
		{Role: RoleTool, CallID: "c-2", Tool: "search_tickets", Status: StatusCacheHit},
		{Role: RoleTool, CallID: "c-3", Tool: "close_ticket", Status: StatusApproved},
	}
	assert.Equal(t, cfg.Answer, ScriptedAnswer(cfg, ran))

	rejected := append(ran[:3:3], Entry{Role: RoleTool, CallID: "c-3", Tool: "close_ticket", Status: StatusRejected, Error: "not executed: rejected by bob: wrong ticket"})
	assert.Equal(t, `Not done: c-3 close_ticket: not executed: rejected by bob: wrong ticket. (The script's answer, written before its calls ran: "Closed TKT-3 after approval.")`,
		ScriptedAnswer(cfg, rejected))

	// Only the turn's own calls count: an earlier turn's refusal was told then.
	next := append(rejected, Entry{Role: RoleAssistant, Text: "…"}, Entry{Role: RoleUser, Text: "now search"},
		Entry{Role: RoleTool, CallID: "c-4", Tool: "search_tickets", Status: StatusOK})
	assert.Equal(t, cfg.Answer, ScriptedAnswer(cfg, next))

	failed := []Entry{{Role: RoleTool, CallID: "c-1", Tool: "refund", Status: StatusError, Error: "the desk is down"},
		{Role: RoleTool, CallID: "c-2", Tool: "close_ticket", Status: StatusBlocked}, {Role: RoleTool, CallID: "c-3", Tool: "wire", Status: StatusExpired}}
	assert.Equal(t, "Not done: c-1 refund: the desk is down; c-2 close_ticket was refused; c-3 wire was not decided in time.",
		ScriptedAnswer(Config{Kind: KindScripted}, failed))
}
