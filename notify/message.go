package notify

import (
	"fmt"
	"strings"
	"time"

	"github.com/toolgate/toolgate/workflows"
)

// fact is one line of what a notification says: a label and its value
// (code: an identifier, shown as code where the medium has it).
type fact struct {
	label, value string
	code         bool
	rendered     bool // value is already in the medium's form (esc applied)
}

// headline is a notification's one-line title.
func headline(n workflows.Notification) string {
	call := callName(n)
	switch n.Event {
	case workflows.NotifyWaiting:
		return call + " waits for a decision"
	case workflows.NotifyDecided:
		if n.By != "" {
			return fmt.Sprintf("%s %s by %s", call, orDash(n.Decision), n.By)
		}
		return call + " decided: " + orDash(n.Decision)
	case workflows.NotifyExpired:
		return call + ": no decision in time"
	case workflows.NotifyBlocked:
		if n.CallID != "" {
			return fmt.Sprintf("run %s blocked at %s", n.WorkflowID, call)
		}
		return fmt.Sprintf("run %s blocked", n.WorkflowID)
	case workflows.NotifyFailed:
		return fmt.Sprintf("run %s failed", n.WorkflowID)
	case EventTest:
		return "toolgate test message"
	}
	return fmt.Sprintf("run %s: %s", n.WorkflowID, n.Event)
}

// callName is "close_ticket (c-3)".
func callName(n workflows.Notification) string {
	switch {
	case n.Tool != "" && n.CallID != "":
		return fmt.Sprintf("%s (%s)", n.Tool, n.CallID)
	case n.CallID != "":
		return "call " + n.CallID
	}
	return orDash(n.Tool)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// facts are what a human needs to know of n, in order; esc escapes text
// for the medium and mention renders an approver for it (a Slack mention).
func facts(n workflows.Notification, esc func(string) string, mention func(workflows.Recipient) string) []fact {
	var out []fact
	add := func(label, value string, code bool) {
		if value != "" {
			out = append(out, fact{label: label, value: value, code: code})
		}
	}
	run := n.WorkflowID
	if n.RunID != "" {
		run += " (run " + n.RunID + ")"
	}
	add("Run", run, false)
	add("Call", n.CallID, true)
	add("Tool", n.Tool, true)
	if n.Kind != "" && n.Kind != "gate" {
		add("Kind", n.Kind, false)
	}
	add("Reason", n.Reason, false)
	add("Rule", n.Rule, true)
	if n.Event == workflows.NotifyWaiting {
		out = append(out, fact{label: "Who may decide", value: whoMayDecide(n, esc, mention), rendered: true})
	}
	if !n.ExpiresAt.IsZero() {
		add("Expires", n.ExpiresAt.UTC().Format(time.RFC3339), false)
	}
	add("Decision", n.Decision, false)
	add("By", n.By, false)
	add("Error", n.Error, false)
	add("Status", n.Status, false)
	add("args_digest", n.ArgsDigest, true)
	return out
}

// whoMayDecide says who may decide a waiting call: the roles it needs and
// the eligible approvers, or any operator with no policy.
func whoMayDecide(n workflows.Notification, esc func(string) string, mention func(workflows.Recipient) string) string {
	var parts []string
	if n.Needs != nil && len(n.Needs.Roles) > 0 {
		count := n.Needs.Count
		if count <= 0 {
			count = 1
		}
		parts = append(parts, fmt.Sprintf("%d of %s", count, esc(strings.Join(n.Needs.Roles, ", "))))
	}
	var names []string
	for _, a := range n.Approvers {
		names = append(names, mention(a))
	}
	if len(names) > 0 {
		parts = append(parts, strings.Join(names, ", "))
	}
	if len(parts) == 0 {
		return "any operator"
	}
	return strings.Join(parts, ": ")
}
