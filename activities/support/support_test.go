package support

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
)

const (
	goal      = "find the login ticket and close it"
	loginHits = `{"tickets":[{"id":"TKT-3","title":"Cannot log in after password reset","status":"open"}]}`
	noHits    = `{"tickets":[]}`
)

// transcript builds a transcript step by step, numbering calls c-1, c-2, …
type transcript struct {
	entries []plan.Entry
	calls   int
}

func newTranscript(text string) *transcript {
	return &transcript{entries: []plan.Entry{{Role: plan.RoleUser, Text: text}}}
}

// called appends one proposed call and its outcome.
func (tr *transcript) called(toolName, args, status, result, errText string) *transcript {
	tr.calls++
	id := fmt.Sprintf("c-%d", tr.calls)
	tr.entries = append(tr.entries,
		plan.Entry{Role: plan.RoleAssistant, Calls: []tool.Call{{ID: id, Tool: toolName, Args: json.RawMessage(args)}}},
		plan.Entry{Role: plan.RoleTool, CallID: id, Tool: toolName, Status: status, Result: json.RawMessage(result), Error: errText},
	)
	return tr
}

func (tr *transcript) said(role, text string) *transcript {
	tr.entries = append(tr.entries, plan.Entry{Role: role, Text: text})
	return tr
}

func decide(t *testing.T, goalText string, tr *transcript) plan.Decision {
	t.Helper()
	d, err := Plan(context.Background(), plan.Request{Goal: goalText, Transcript: tr.entries})
	require.NoError(t, err)
	return d
}

// proposes asserts d is exactly one call of toolName with args.
func proposes(t *testing.T, d plan.Decision, toolName, args string) {
	t.Helper()
	require.Empty(t, d.Answer)
	require.Len(t, d.Calls, 1)
	assert.Equal(t, toolName, d.Calls[0].Tool)
	assert.JSONEq(t, args, string(d.Calls[0].Args))
}

func TestSearchesFirst(t *testing.T) {
	d := decide(t, goal, newTranscript(goal))
	proposes(t, d, "search_tickets", `{"query":"login"}`)
	assert.Equal(t, `{"query":"login"}`, string(d.Calls[0].Args), "exact bytes: the memo sees one key")

	// With no transcript at all the goal is the request.
	d, err := Plan(context.Background(), plan.Request{Goal: goal})
	require.NoError(t, err)
	proposes(t, d, "search_tickets", `{"query":"login"}`)
}

func TestSearchesAgainToConfirmBeforeClosing(t *testing.T) {
	tr := newTranscript(goal).called("search_tickets", `{"query":"login"}`, "ok", loginHits, "")
	d := decide(t, goal, tr)
	proposes(t, d, "search_tickets", `{"query":"login"}`)
}

func TestClosesFirstMatchAfterConfirming(t *testing.T) {
	tr := newTranscript(goal).
		called("search_tickets", `{"query":"login"}`, "ok", loginHits, "").
		called("search_tickets", `{"query":"login"}`, "cache_hit", loginHits, "")
	proposes(t, decide(t, goal, tr), "close_ticket", `{"ticket_id":"TKT-3"}`)
}

func TestClosesFirstOpenMatch(t *testing.T) {
	hits := `{"tickets":[{"id":"TKT-4","title":"Invoice","status":"closed"},{"id":"TKT-5","title":"SSO","status":"open"}]}`
	text := "close the auth ticket"
	tr := newTranscript(text).
		called("search_tickets", `{"query":"auth"}`, "ok", hits, "").
		called("search_tickets", `{"query":"auth"}`, "cache_hit", hits, "")
	proposes(t, decide(t, text, tr), "close_ticket", `{"ticket_id":"TKT-5"}`)
}

func TestAnswersWhenEveryMatchIsClosed(t *testing.T) {
	hits := `{"tickets":[{"id":"TKT-3","title":"Cannot log in after password reset","status":"closed"}]}`
	tr := newTranscript(goal).
		called("search_tickets", `{"query":"login"}`, "ok", hits, "").
		called("search_tickets", `{"query":"login"}`, "ok", hits, "")
	d := decide(t, goal, tr)
	assert.Empty(t, d.Calls)
	assert.Contains(t, d.Answer, "already closed")
}

func confirmed() *transcript {
	return newTranscript(goal).
		called("search_tickets", `{"query":"login"}`, "ok", loginHits, "").
		called("search_tickets", `{"query":"login"}`, "cache_hit", loginHits, "")
}

func TestAnswersClosed(t *testing.T) {
	tr := confirmed().called("close_ticket", `{"ticket_id":"TKT-3"}`, "ok", `{"id":"TKT-3","status":"closed","already_closed":false}`, "")
	d := decide(t, goal, tr)
	assert.Empty(t, d.Calls)
	assert.Equal(t, "Closed TKT-3 (Cannot log in after password reset).", d.Answer)
}

func TestAnswersAlreadyClosed(t *testing.T) {
	tr := confirmed().called("close_ticket", `{"ticket_id":"TKT-3"}`, "ok", `{"id":"TKT-3","status":"closed","already_closed":true}`, "")
	d := decide(t, goal, tr)
	assert.Contains(t, d.Answer, "TKT-3 (Cannot log in after password reset) was already closed")
}

func TestAnswersRejectedWithReason(t *testing.T) {
	tr := confirmed().called("close_ticket", `{"ticket_id":"TKT-3"}`, "rejected", "", "wrong ticket, the customer replied")
	d := decide(t, goal, tr)
	assert.Empty(t, d.Calls, "a rejection is final: no second attempt")
	assert.Contains(t, d.Answer, "did not close TKT-3")
	assert.Contains(t, d.Answer, "wrong ticket, the customer replied")
}

func TestAnswersExpiredWithReason(t *testing.T) {
	tr := confirmed().called("close_ticket", `{"ticket_id":"TKT-3"}`, "expired", "", "approval expired after 24h0m0s")
	d := decide(t, goal, tr)
	assert.Empty(t, d.Calls)
	assert.Contains(t, d.Answer, "did not close TKT-3")
	assert.Contains(t, d.Answer, "approval expired after 24h0m0s")
}

func TestAnswersCancelled(t *testing.T) {
	tr := confirmed().called("close_ticket", `{"ticket_id":"TKT-3"}`, "cancelled", "", "not executed: cancelled by bob: the user left")
	d := decide(t, goal, tr)
	assert.Empty(t, d.Calls, "a cancellation is final")
	assert.Contains(t, d.Answer, "did not close TKT-3")
	assert.Contains(t, d.Answer, "cancelled")
	assert.Contains(t, d.Answer, "the user left")
}

// A close a human answered in the tool's place did not close anything, and
// the answer says whose answer it was.
func TestAnswersRespondedClose(t *testing.T) {
	tr := confirmed().called("close_ticket", `{"ticket_id":"TKT-3"}`, "responded", `{"closed":false}`, "")
	tr.entries[len(tr.entries)-1].Note = "not executed: alice answered in the tool's place"
	d := decide(t, goal, tr)
	assert.Empty(t, d.Calls)
	assert.Contains(t, d.Answer, "did not close TKT-3")
	assert.Contains(t, d.Answer, "alice answered in the tool's place")
	assert.NotContains(t, d.Answer, "Closed")
}

func TestAnswersCloseError(t *testing.T) {
	tr := confirmed().called("close_ticket", `{"ticket_id":"TKT-3"}`, "error", "", "ticket TKT-3 not found")
	d := decide(t, goal, tr)
	assert.Empty(t, d.Calls)
	assert.Contains(t, d.Answer, "could not close TKT-3")
	assert.Contains(t, d.Answer, "ticket TKT-3 not found")
}

func TestAnswersNothingFound(t *testing.T) {
	text := "find the refrigerator ticket and close it"
	tr := newTranscript(text).called("search_tickets", `{"query":"refrigerator"}`, "ok", noHits, "")
	d := decide(t, text, tr)
	assert.Empty(t, d.Calls, "nothing to confirm or close")
	assert.Equal(t, `No ticket matches "refrigerator".`, d.Answer)
}

func TestAnswersSearchFailure(t *testing.T) {
	tr := newTranscript(goal).called("search_tickets", `{"query":"login"}`, "error", "", "database is locked")
	d := decide(t, goal, tr)
	assert.Empty(t, d.Calls)
	assert.Contains(t, d.Answer, "could not search")
	assert.Contains(t, d.Answer, "database is locked")
}

func TestFindOnlyAnswersAfterOneSearch(t *testing.T) {
	text := "find tickets about auth"
	hits := `{"tickets":[{"id":"TKT-4","title":"Invoice","status":"open"},{"id":"TKT-5","title":"SSO","status":"open"}]}`
	tr := newTranscript(text).called("search_tickets", `{"query":"auth"}`, "ok", hits, "")
	d := decide(t, text, tr)
	assert.Empty(t, d.Calls)
	assert.Equal(t, `Found 2 tickets for "auth": TKT-4 (Invoice) [open]; TKT-5 (SSO) [open].`, d.Answer)
}

func TestActsOnLatestUserMessage(t *testing.T) {
	tr := confirmed().
		called("close_ticket", `{"ticket_id":"TKT-3"}`, "ok", `{"id":"TKT-3","status":"closed","already_closed":false}`, "").
		said(plan.RoleAssistant, "Closed TKT-3 (Cannot log in after password reset).").
		said(plan.RoleUser, "also close the billing one")
	proposes(t, decide(t, goal, tr), "search_tickets", `{"query":"billing"}`)

	// Only the new turn counts: an earlier turn's searches for the same topic
	// do not skip this turn's search (the memo makes it free anyway).
	tr2 := confirmed().said(plan.RoleAssistant, "…").said(plan.RoleUser, "close the login ticket")
	proposes(t, decide(t, goal, tr2), "search_tickets", `{"query":"login"}`)
}

func TestIgnoresOtherTopicsAndTools(t *testing.T) {
	tr := newTranscript(goal).
		called("search_tickets", `{"query":"billing"}`, "ok", `{"tickets":[{"id":"TKT-1","title":"Billing","status":"open"}]}`, "").
		called("get_ticket", `{"ticket_id":"TKT-1"}`, "ok", `{}`, "")
	proposes(t, decide(t, goal, tr), "search_tickets", `{"query":"login"}`)
}

func TestMissingToolsAndTopic(t *testing.T) {
	d, err := Plan(context.Background(), plan.Request{Goal: goal, Tools: []plan.ToolInfo{{Name: "get_ticket"}}})
	require.NoError(t, err)
	assert.Contains(t, d.Answer, "no search_tickets tool")

	d, err = Plan(context.Background(), plan.Request{Goal: goal, Transcript: confirmed().entries, Tools: []plan.ToolInfo{{Name: "search_tickets"}}})
	require.NoError(t, err)
	assert.Contains(t, d.Answer, "no close_ticket tool")

	d, err = Plan(context.Background(), plan.Request{Goal: "please close it"})
	require.NoError(t, err)
	assert.Empty(t, d.Calls)
	assert.Contains(t, d.Answer, "Which tickets")
}

func TestTopic(t *testing.T) {
	for text, want := range map[string]string{
		"find the login ticket and close it": "login",
		"Find the LOGIN ticket and close it": "login",
		"also close the billing one":         "billing",
		"close the ticket about shipping":    "shipping",
		"find tickets about auth":            "auth",
		"search for invoice":                 "invoice",
		"close the \"password reset\" one":   "password reset",
		"refund problems":                    "refund",
		"please close it":                    "",
		"":                                   "",
	} {
		assert.Equal(t, want, Topic(text), text)
	}
	assert.True(t, wantsClose("find the login ticket and close it"))
	assert.True(t, wantsClose("Resolve the billing one"))
	assert.False(t, wantsClose("find the closed tickets"))
}

// TestSeedWalkthrough plays the seed's support run against canned tool
// results: search, the same search again (a memo hit in a real run), the
// close, and the answer.
func TestSeedWalkthrough(t *testing.T) {
	results := map[string]string{
		"search_tickets": loginHits,
		"close_ticket":   `{"id":"TKT-3","status":"closed","already_closed":false}`,
	}
	tr := newTranscript(goal)
	var tools []string
	for step := 0; step < 10; step++ {
		d, err := Plan(context.Background(), plan.Request{Goal: goal, Transcript: tr.entries, Step: step})
		require.NoError(t, err)
		if len(d.Calls) == 0 {
			assert.Equal(t, "Closed TKT-3 (Cannot log in after password reset).", d.Answer)
			break
		}
		require.Len(t, d.Calls, 1)
		c := d.Calls[0]
		tools = append(tools, c.Tool)
		tr.called(c.Tool, string(c.Args), "ok", results[c.Tool], "")
	}
	assert.Equal(t, []string{"search_tickets", "search_tickets", "close_ticket"}, tools)
}
