package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// next names the nodes waiting to run: "gate:<tool>" for a call held at the
// gate, "interrupt:<tool>" for a tool waiting on a human.
func (r *run) next() []string {
	out := []string{}
	for _, p := range r.pending {
		node := p.Node()
		if p.need.Count > 1 {
			node += fmt.Sprintf(" (%d of %d approvals%s)", len(p.ApprovedBy), p.need.Count, byNames(p.ApprovedBy))
		}
		out = append(out, node)
	}
	return out
}

func byNames(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return ": " + strings.Join(names, ", ")
}

func (r *run) status() string {
	switch {
	case r.done != "":
		return r.done
	case len(r.pending) > 0:
		return StatusWaitingForApproval
	case r.AwaitingInput:
		return StatusWaitingForInput
	default:
		return StatusRunning
	}
}

func (r *run) state() State {
	interrupts := make([]Interrupt, 0, len(r.pending)) // [] rather than null in JSON
	for _, p := range r.pending {
		interrupts = append(interrupts, p.Interrupt)
	}
	return State{Status: r.status(), Goal: r.in.Goal, Turn: r.Turn, Queued: len(r.Messages), Next: r.next(), Interrupts: interrupts, Memo: r.memo.stats(),
		Calls: r.Calls, Answer: r.Answer, Error: r.errText, BlockedOn: r.blockedOn, Refused: r.Refused, TraceDropped: r.TraceDropped,
		Policy: r.engine != nil, RequestedBy: r.RequestedBy, ForkedBy: r.ForkedBy, Grants: r.Grants}
}

// publish keeps what operators see current: the run's details in the Temporal
// UI and, when the namespace has them, toolgate's search attributes.
func (r *run) publish(ctx workflow.Context) {
	status := r.status()
	var waits []string
	var tools []string
	for _, p := range r.pending {
		waits = append(waits, fmt.Sprintf("%s %s %s (%s)", p.Tool, p.CallArgs, p.Kind, p.CallID))
		if !contains(tools, p.Tool) {
			tools = append(tools, p.Tool)
		}
	}
	details := status
	if len(waits) > 0 {
		details = "waiting for approval: " + strings.Join(waits, "; ")
	}
	if details == r.shown {
		return
	}
	r.shown = details
	workflow.SetCurrentDetails(ctx, details)
	if r.Config.SearchAttributes {
		err := workflow.UpsertTypedSearchAttributes(ctx,
			temporal.NewSearchAttributeKeyKeyword(SearchAttrStatus).ValueSet(status),
			temporal.NewSearchAttributeKeyKeywordList(SearchAttrPendingTools).ValueSet(append([]string{}, tools...)))
		if err != nil {
			r.logger.Warn("upserting search attributes", "error", err.Error())
		}
	}
}
