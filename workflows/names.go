package workflows

import (
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/internal/names"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/policy"
)

// This file holds who a decision may say it is from (rules version 12):
// a name that reads as it is written, never one of the run's own forms
// nor a door's, unless the decision is that door's own.

// The approver names the doors write for the people they take a decision
// from, on a run without a policy (under one, every decision is signed by
// an approver the policy names, and named so).
const (
	// DoorElicitation starts the name of an MCP client's user, asked through
	// MCP elicitation (package mcpserve: elicitation:CALLER).
	DoorElicitation = "elicitation:"
	// DoorWebhook starts the name of a click on a webhook's link (package
	// confirm: webhook:TARGET).
	DoorWebhook = ViaWebhook + ":"
	// DoorSlack starts the name of a click on a Slack message's button or
	// link (package confirm: slack:USER).
	DoorSlack = policy.ViaSlack + ":"
)

// DoorApprovers are the door forms (DoorElicitation, DoorWebhook,
// DoorSlack). A decision takes one only as its door
// sends it (doorRefusal), and no decision takes a name that looks like one.
var DoorApprovers = []string{DoorElicitation, DoorWebhook, DoorSlack}

// checkApprover (rules version 12) refuses a decision's approver name that
// does not read as it is written (names.Check: a compatibility form, an
// invisible rune, a word of mixed scripts…), one that is or looks like
// (names.LooksLike: any case, look-alike letters) a name the run writes
// itself — ReservedApprovers and WithdrawnBy, which no decision ever takes —
// and one that is or looks like a door's, unless the decision is the
// door's own (doorRefusal). An empty name passes: the run records
// "(unnamed)", or under a policy the token's approver.
func (r *run) checkApprover(in DecisionInput, v verb) error {
	name := in.Approver
	if name == "" {
		return nil
	}
	shown := clip(name, MaxNameBytes)
	if err := names.Check(name); err != nil {
		return refusal(RefusedDecision, "approver %q refused: %v; an approver's name must read as it is written, so that no name passes for another",
			shown, err)
	}
	if form, ok := names.LooksLike(name, ReservedApprovers); ok {
		return refusal(RefusedDecision, "approver %q refused: names starting with %s are the run's own (a rule that decided, a grant that answered, always_approve), so no decision may take them, "+
			"in any case or spelt with look-alike letters (this one looks like %s)", shown, strings.Join(ReservedApprovers, ", "), form)
	}
	if _, ok := names.LooksLike(name, []string{WithdrawnBy}); ok {
		return refusal(RefusedDecision, "approver %q refused: %s is who the run records for a call its caller withdrew (the %s update), so no decision may take it, nor a name that looks like it",
			shown, WithdrawnBy, UpdateWithdraw)
	}
	if form, ok := names.LooksLike(name, DoorApprovers); ok {
		if why := r.doorRefusal(in, v, form); why != "" {
			return refusal(RefusedDecision, "approver %q refused: %s", shown, why)
		}
	}
	return nil
}

// doorRefusal says why decision in (of verb v), whose approver looks like
// door form, is not that door's own decision, or returns "". A door's own
// decision names its approver with the form exactly, then a name, and is
// sent as only that door sends it, on a run without a policy:
//
//   - slack:… and webhook:… (package confirm) come with via "slack" or
//     "webhook": the click on a Slack message's button or on a link the run
//     sent, whose secret the decision must then carry (checkLink).
//   - elicitation:… (package mcpserve) comes by no link, on a run whose
//     planner is external (mcpserve proposes calls to such runs only), and
//     approves or rejects a call waiting at the gate as it is: mcpserve
//     asks only the gate's question, and its user can neither edit, answer
//     nor respond. It is the narrowest rule the run can check: on a run
//     without a policy no name is vouched for — any client that may send
//     it decisions may call itself anything else — and the record says the
//     decision came through elicitation, not who the user was.
func (r *run) doorRefusal(in DecisionInput, v verb, form string) string {
	name := in.Approver
	switch {
	case !strings.HasPrefix(name, form):
		return fmt.Sprintf("it looks like %s, how a door (MCP elicitation, a webhook's or a Slack message's link) names the person it took a decision from: "+
			"only that door writes such a name, and exactly as %sNAME", form, form)
	case name == form:
		return fmt.Sprintf("%s names no one after it (a door writes %sNAME)", form, form)
	case r.engine != nil:
		return fmt.Sprintf("names starting with %s are written by a door only on a run without a policy; under this run's policy every decision is signed, "+
			"and named, by an approver the policy names", strings.Join(DoorApprovers, ", "))
	}
	switch form {
	case DoorSlack, DoorWebhook:
		channel := strings.TrimSuffix(form, ":")
		if in.Via != channel {
			return fmt.Sprintf("%sNAME is the name of a click that came through %s (via %q, with the secret of the link the run sent), and this decision's via is %q",
				form, channel, channel, clip(in.Via, 32))
		}
	case DoorElicitation:
		switch {
		case in.Via != "" || in.Link != "":
			return fmt.Sprintf("%sNAME is the name of an MCP client's user asked through elicitation, which comes by no link (this decision's via is %q)", form, clip(in.Via, 32))
		case r.in.Planner.Kind != plan.KindExternal:
			return fmt.Sprintf("%sNAME is the name of an MCP client's user asked through elicitation about a call it proposed, and this run's planner is %q, not %q",
				form, clip(r.in.Planner.Kind, MaxNameBytes), plan.KindExternal)
		case v == verbRespond || len(in.EditedArgs) > 0 || len(in.Data) > 0 || in.Cancel:
			return fmt.Sprintf("%sNAME is the name of an MCP client's user asked through elicitation, who approves or rejects the call as it is: no edit, answer, response or cancel", form)
		case in.Kind != "" && in.Kind != KindGate:
			return fmt.Sprintf("%sNAME is the name of an MCP client's user asked through elicitation, which asks only the gate's question, never a tool's own (kind %q)", form, clip(string(in.Kind), 32))
		}
	}
	return ""
}
