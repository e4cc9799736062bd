// Package support is a small rule-based planner for the demo support desk: it
// carries out goals such as "find the login ticket and close it".
//
// It is stateless: everything it knows comes from the request — the goal, the
// latest user message and the transcript of the current turn — so it can run
// as an activity, be retried, and be replayed from history without surprises.
// Each call decides one step:
//
//  1. no search for the topic yet        → search_tickets {"query": topic}
//  2. one search, the goal asks to close → the same search again, to confirm
//     the ticket is still open before closing it (the run's memo answers it)
//  3. confirmed                          → close_ticket {"ticket_id": first open match}
//  4. the close has an outcome           → the answer: closed, or not and why
//
// A search that finds nothing, or a goal that does not ask to close, ends with
// an answer listing what was found.
package support

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
)

// The desk tools this planner proposes.
const (
	searchTool = "search_tickets"
	closeTool  = "close_ticket"
)

// Plan is the support planner, registered as the activity
// plan.ActivityName(plan.KindSupport). It returns the next calls to make, or
// the answer.
func Plan(ctx context.Context, req plan.Request) (plan.Decision, error) {
	msg, turn := currentTurn(req)
	topic := Topic(msg)
	if topic == "" {
		return answer("Which tickets should I look for? Name a topic, for example \"find the login ticket and close it\"."), nil
	}
	if missing := missingTools(req.Tools, searchTool); missing != "" {
		return answer(fmt.Sprintf("I cannot search tickets: no %s tool is registered.", missing)), nil
	}
	closing := wantsClose(msg)
	searchArgs := mustJSON(map[string]string{"query": topic})

	searches, failed := searchesFor(turn, topic)
	if len(searches) == 0 {
		if failed != nil {
			return answer(fmt.Sprintf("I could not search the tickets for %q: %s", topic, reason(*failed))), nil
		}
		return propose(searchTool, searchArgs), nil
	}
	found := searches[len(searches)-1] // the latest word on the tickets
	if len(found) == 0 {
		return answer(fmt.Sprintf("No ticket matches %q.", topic)), nil
	}
	if !closing {
		return answer(fmt.Sprintf("Found %s for %q: %s.", text.Count(len(found), "ticket"), topic, list(found))), nil
	}
	if len(searches) == 1 {
		// Search once more with the same arguments: confirm the ticket is
		// still open before closing it. An unchanged search is answered by the
		// run's memo (cache_hit), so the check costs nothing.
		return propose(searchTool, searchArgs), nil
	}
	target, ok := firstOpen(found)
	if !ok {
		return answer(fmt.Sprintf("Every ticket matching %q is already closed: %s.", topic, list(found))), nil
	}
	if missing := missingTools(req.Tools, closeTool); missing != "" {
		return answer(fmt.Sprintf("Found %s, but I cannot close it: no %s tool is registered.", describe(target), missing)), nil
	}
	outcome, ok := closeOutcome(turn, target.ID)
	if !ok {
		return propose(closeTool, mustJSON(map[string]string{"ticket_id": target.ID})), nil
	}
	return answer(closeAnswer(target, outcome)), nil
}

// ticket is one search match, as search_tickets returns it.
type ticket struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Status string `json:"status"`
}

// currentTurn returns the words the planner acts on — the latest user message,
// or the goal — and the transcript entries since that message.
func currentTurn(req plan.Request) (string, []plan.Entry) {
	for i := len(req.Transcript) - 1; i >= 0; i-- {
		e := req.Transcript[i]
		if e.Role == plan.RoleUser && strings.TrimSpace(e.Text) != "" {
			return e.Text, req.Transcript[i+1:]
		}
	}
	return req.Goal, req.Transcript
}

// callArgs maps the call ids the planner proposed in this turn to their arguments.
func callArgs(turn []plan.Entry) map[string]json.RawMessage {
	args := map[string]json.RawMessage{}
	for _, e := range turn {
		if e.Role != plan.RoleAssistant {
			continue
		}
		for _, c := range e.Calls {
			args[c.ID] = c.Args
		}
	}
	return args
}

// outcomes returns the tool outcomes of this turn for one tool, in order,
// each with the arguments of its call (outcomes whose call is not in the
// transcript are skipped).
func outcomes(turn []plan.Entry, toolName string) []outcome {
	args := callArgs(turn)
	var out []outcome
	for _, e := range turn {
		if e.Role != plan.RoleTool || e.Tool != toolName {
			continue
		}
		a, ok := args[e.CallID]
		if !ok {
			continue
		}
		out = append(out, outcome{Entry: e, Args: a})
	}
	return out
}

type outcome struct {
	plan.Entry
	Args json.RawMessage
}

// succeeded: the call produced a result (run now, served by the memo, or
// given by a human in the tool's place).
func succeeded(e plan.Entry) bool {
	return e.Status == plan.StatusOK || e.Status == plan.StatusCacheHit || e.Status == plan.StatusResponded
}

// searchesFor returns the results of this turn's successful searches for
// topic, oldest first, and the last failed one if none succeeded.
func searchesFor(turn []plan.Entry, topic string) ([][]ticket, *plan.Entry) {
	var results [][]ticket
	var failed *plan.Entry
	for _, o := range outcomes(turn, searchTool) {
		var a struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(o.Args, &a) != nil || !strings.EqualFold(strings.TrimSpace(a.Query), topic) {
			continue
		}
		var res struct {
			Tickets []ticket `json:"tickets"`
		}
		if !succeeded(o.Entry) || json.Unmarshal(o.Result, &res) != nil {
			e := o.Entry
			failed = &e
			continue
		}
		results = append(results, res.Tickets)
	}
	return results, failed
}

// closeOutcome returns this turn's latest close_ticket outcome for ticketID.
func closeOutcome(turn []plan.Entry, ticketID string) (plan.Entry, bool) {
	var last plan.Entry
	found := false
	for _, o := range outcomes(turn, closeTool) {
		var a struct {
			TicketID string `json:"ticket_id"`
		}
		if json.Unmarshal(o.Args, &a) == nil && a.TicketID == ticketID {
			last, found = o.Entry, true
		}
	}
	return last, found
}

// closeAnswer words the outcome of closing t.
func closeAnswer(t ticket, e plan.Entry) string {
	switch e.Status {
	case plan.StatusOK, plan.StatusCacheHit:
		var res struct {
			AlreadyClosed bool `json:"already_closed"`
		}
		if json.Unmarshal(e.Result, &res) == nil && res.AlreadyClosed {
			return fmt.Sprintf("%s was already closed; nothing changed.", describe(t))
		}
		return fmt.Sprintf("Closed %s.", describe(t))
	case plan.StatusRejected:
		return fmt.Sprintf("I did not close %s: the reviewer said no (%s).", describe(t), reason(e))
	case plan.StatusCancelled:
		return fmt.Sprintf("I did not close %s: the request was cancelled (%s).", describe(t), reason(e))
	case plan.StatusResponded:
		return fmt.Sprintf("I did not close %s: %s, answering %s.", describe(t), strings.TrimPrefix(e.Note, "not executed: "), strings.TrimSpace(string(e.Result)))
	case plan.StatusExpired:
		return fmt.Sprintf("I did not close %s: nobody approved it in time (%s).", describe(t), reason(e))
	case plan.StatusBlocked:
		return fmt.Sprintf("I did not close %s: this run may not close tickets (%s).", describe(t), reason(e))
	default:
		return fmt.Sprintf("I could not close %s: %s.", describe(t), reason(e))
	}
}

// describe names a ticket for an answer: "TKT-3 (Cannot log in after password reset)".
func describe(t ticket) string {
	if t.Title == "" {
		return t.ID
	}
	return fmt.Sprintf("%s (%s)", t.ID, t.Title)
}

func list(ts []ticket) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = describe(t)
		if t.Status != "" {
			parts[i] += " [" + t.Status + "]"
		}
	}
	return strings.Join(parts, "; ")
}

func firstOpen(ts []ticket) (ticket, bool) {
	for _, t := range ts {
		if t.Status == "" || t.Status == "open" {
			return t, true
		}
	}
	return ticket{}, false
}

func reason(e plan.Entry) string {
	if r := strings.TrimSpace(e.Error); r != "" {
		return r
	}
	return "no reason given; status " + e.Status
}

// missingTools returns the first of names not among the registered tools, or
// "". A request that lists no tools is taken to offer them all.
func missingTools(tools []plan.ToolInfo, names ...string) string {
	if len(tools) == 0 {
		return ""
	}
	for _, n := range names {
		if !slices.ContainsFunc(tools, func(t plan.ToolInfo) bool { return t.Name == n }) {
			return n
		}
	}
	return ""
}

func propose(name string, args json.RawMessage) plan.Decision {
	return plan.Decision{Calls: []tool.Proposal{{Tool: name, Args: args}}}
}

func answer(text string) plan.Decision { return plan.Decision{Answer: text} }

func mustJSON(v map[string]string) json.RawMessage {
	b, err := json.Marshal(v) // a map of strings always encodes
	if err != nil {
		panic(err)
	}
	return b
}

var (
	wordPattern   = regexp.MustCompile(`[\p{L}\p{N}][\p{L}\p{N}_\-]*`)
	quotedPattern = regexp.MustCompile(`["“]([^"”]+)["”]`)
	// "the login ticket", "the billing one", "login issue"
	beforeNoun = regexp.MustCompile(`(?i)\b([\p{L}\p{N}][\p{L}\p{N}_\-]*)\s+(?:tickets?|ones?|issues?|problems?|requests?)\b`)
	// "tickets about billing", "for shipping", "regarding invoices"
	afterPrep = regexp.MustCompile(`(?i)\b(?:about|for|regarding|on|with|mentioning|concerning)\s+(?:the\s+|a\s+|an\s+)?([\p{L}\p{N}][\p{L}\p{N}_\-]*)`)
	closeWord = regexp.MustCompile(`(?i)\b(?:close|resolve|shut)\b`)
)

// stopwords are words that are never the topic: verbs of the request,
// articles, pronouns, and the nouns that name a ticket.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the this that these those it its them they me my our your you i we us please
		find search look show get list give tell check can could would will should also and or then now just
		close closed resolve resolved shut open opened mark marked as to of in on at by for from with about
		regarding concerning mentioning is are was be up out all any some one ones ticket tickets issue issues
		problem problems request requests support help there which what whose`) {
		m[w] = true
	}
	return m
}()

// Topic extracts the subject to search for from a request: a quoted phrase,
// the word before "ticket"/"one"/"issue" ("the login ticket"), the word after
// "about"/"for" ("tickets about billing"), or else the first word that is not
// a stopword. It returns "" when there is none.
func Topic(text string) string {
	if m := quotedPattern.FindStringSubmatch(text); m != nil && strings.TrimSpace(m[1]) != "" {
		return strings.ToLower(strings.TrimSpace(m[1]))
	}
	for _, re := range []*regexp.Regexp{beforeNoun, afterPrep} {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			if w := strings.ToLower(m[1]); !stopwords[w] {
				return w
			}
		}
	}
	for _, w := range wordPattern.FindAllString(text, -1) {
		if w = strings.ToLower(w); !stopwords[w] {
			return w
		}
	}
	return ""
}

// wantsClose reports whether the request asks to close the ticket.
func wantsClose(text string) bool { return closeWord.MatchString(text) }
