package mcpserve

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/workflows"
)

// This file asks the client's own user to decide a waiting call, through
// MCP elicitation: only when the operator allowed it (Options.ElicitApprovals,
// `toolgate mcp serve --approve-by-elicitation`), never under a policy, and
// only of a client that declared it can elicit. The agent's host is not an
// authenticated approver: its user's "yes" is recorded as such
// (ElicitationApprover), and a decision from an operator still wins if it
// comes first.

// ElicitationApprover is the approver a decision taken through elicitation
// is recorded under, for the caller who.
func ElicitationApprover(who string) string { return "elicitation:" + who }

// elicitSchema is what the client's user is asked: yes or no, and why not.
var elicitSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"approve": map[string]any{"type": "boolean", "title": "Approve this exact call"},
		"reason":  map[string]any{"type": "string", "title": "If not, why (the agent is told)"},
	},
	"required": []string{"approve"},
}

// canElicit reports whether the session's client declared elicitation.
func canElicit(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil
}

// elicit asks the client's user to decide the call it waits on, and sends
// the answer to run id as who's user's decision. A cancelled question, or
// one the request outlived, decides nothing.
func (s *Server) elicit(ctx context.Context, ss *mcp.ServerSession, id, who string, it workflows.Interrupt) {
	msg := fmt.Sprintf("toolgate: call %s of %s with %s waits for a human's approval (%s). Approve this exact call?",
		it.CallID, it.Tool, text.Clip(string(it.CallArgs), maxMessageBytes), text.Clip(it.Reason, 200))
	res, err := ss.Elicit(ctx, &mcp.ElicitParams{Message: msg, RequestedSchema: elicitSchema})
	if err != nil || ctx.Err() != nil {
		if ctx.Err() == nil {
			s.opts.Logger.Warn("asking the client's user to decide", "run", id, "call", it.CallID, "err", err)
		}
		return
	}
	in := workflows.DecisionInput{CallID: it.CallID, ArgsDigest: it.ArgsDigest, Kind: it.Kind, Approver: ElicitationApprover(who)}
	approve := false
	switch res.Action {
	case "accept":
		approve, _ = res.Content["approve"].(bool)
		if reason, _ := res.Content["reason"].(string); !approve {
			in.Reason = text.Clip(reason, workflows.MaxTextBytes)
		}
	case "decline":
	default: // cancel: no answer
		return
	}
	if approve {
		in.Note = "approved by " + who + "'s user, asked through MCP elicitation"
	} else if in.Reason == "" {
		in.Reason = "declined by " + who + "'s user, asked through MCP elicitation"
	}
	if _, err := s.opts.Runs.Decide(ctx, id, approve, in); err != nil && ctx.Err() == nil {
		// Decided meanwhile (an operator was first), or the run refused it: say so, change nothing.
		s.opts.Logger.Warn("the decision asked through elicitation was refused", "run", id, "call", it.CallID, "err", err)
	}
}
