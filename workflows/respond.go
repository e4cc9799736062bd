package workflows

import (
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
)

// This file is what a human may decide besides yes and no: answer a call in
// the tool's place (respond), or cancel it; and how each outcome is put to
// the planner.

// verb is what a decision does: the update (and signal) it came as, and the
// action its token must sign.
type verb string

const (
	verbApprove verb = signed.ActionApprove
	verbReject  verb = signed.ActionReject
	verbRespond verb = signed.ActionRespond
)

// checkVerb refuses fields that do not go with the decision's verb, so a
// payload meant for one decision is never half taken as another.
func (r *run) checkVerb(in DecisionInput, v verb) error {
	switch {
	case v != verbRespond && len(in.Response) > 0:
		return refusal(RefusedDecision, "response goes with the respond update (an answer in the tool's place), not with %s", v)
	case v != verbReject && in.Cancel:
		return refusal(RefusedDecision, "cancel goes with the reject update, not with %s", v)
	case v == verbRespond && len(in.Response) == 0:
		return refusal(RefusedDecision, "respond needs response: the answer the planner gets in the tool's place")
	case v == verbRespond && (len(in.EditedArgs) > 0 || len(in.Data) > 0 || in.Reason != ""):
		return refusal(RefusedDecision, "respond takes response (and a note), not edited_args, data or reason: the tool does not run")
	}
	return nil
}

// checkResponse checks an answer given in the tool's place: any JSON value
// within MaxValueBytes, for a tool that is not destructive, or one whose
// policy rule allows it — never to make a side effect look done. Under a
// policy the token must name the response's SHA-256.
func (r *run) checkResponse(p *pending, raw []byte, d ruling) ([]byte, error) {
	if spec := r.specs[p.Tool]; spec.Destructive && !r.ruleAllowsRespond(p.Tool, p.Rule) {
		return nil, refusal(RefusedDecision, "respond refused: %s is destructive, so an answer in its place would say a side effect happened that did not (approve or reject call %s; a policy rule with \"respond: true\" allows it)",
			p.Tool, p.CallID)
	}
	canon, err := tool.Canonical(raw)
	if err != nil {
		return nil, refusal(RefusedDecision, "response refused: not JSON: %s", clip(err.Error(), 200))
	}
	if len(canon) > MaxValueBytes {
		return nil, refusal(RefusedDecision, "response refused: %d bytes, at most %d", len(canon), MaxValueBytes)
	}
	if r.engine != nil && d.dataDigest != sha256Hex(canon) {
		return nil, refusal(RefusedDigestMismatch, "%s's token signs a response with digest %q, not this response's (data_digest is the SHA-256 of the canonical response)", d.by, clip(d.dataDigest, 64))
	}
	return canon, nil
}

// ruleAllowsRespond says whether the policy rule that held a call of toolName
// lets a human answer in its place.
func (r *run) ruleAllowsRespond(toolName, rule string) bool {
	if r.engine == nil || rule == "" {
		return false
	}
	for _, ru := range r.engine.Policy().Tools[toolName].Rules {
		if ru.ID == rule {
			return ru.Respond
		}
	}
	return false
}

// notExecuted is the error a planner is told for a call a human (or no
// human in time) stopped: what happened, not what to do about it.
func (r *run) notExecuted(what string) string {
	return "not executed: " + what
}

// respondedNote tells the planner the result is a human's, not the tool's.
func respondedNote(p *pending) string {
	note := fmt.Sprintf("not executed: %s answered in the tool's place", p.by)
	if s := strings.TrimSpace(p.reason); s != "" {
		note += " (" + s + ")"
	}
	return note
}
