package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// This file asks the client's own user to decide a waiting call, through
// MCP elicitation: only when the operator allowed it (Options.ElicitApprovals,
// `toolgate mcp serve --approve-by-elicitation`), never under a policy, and
// only of a client that declared it can elicit. The agent's host is not an
// authenticated approver: its user's "yes" is recorded as such
// (ElicitationApprover), and a decision from an operator still wins if it
// comes first.
//
// What is asked, and what is not:
//
//   - Only the gate's question (kind gate: a destructive call waits for a
//     yes). A tool's own interrupt (kind interrupt: a compliance hold) is
//     addressed to a reviewer, and the agent's user may be the very party it
//     checks: it is never asked here, and the client is told an operator
//     decides.
//   - The question shows every byte approved: the tool and its arguments
//     whole, as canonical JSON with every rune that does not print as itself
//     escaped (showJSON), and the args_digest the decision is bound to. A
//     call whose arguments do not fit MaxElicitArgsBytes is not asked, and
//     the client is told why.
//   - Each wait (a call id and the time it was asked, requested_at) is asked
//     at most once per open tools/call request. A call asked anew (after a
//     rewind, say) has a new requested_at and is asked again, shown whole
//     again.

// ElicitationApprover is the approver a decision taken through elicitation
// is recorded under, for the caller who.
func ElicitationApprover(who string) string { return "elicitation:" + who }

// MaxElicitArgsBytes bounds the arguments a question shows whole: the bytes
// of their rendering (canonical JSON, escapes included). A waiting call
// whose arguments render longer is not asked by elicitation at all — a
// human must see every byte they approve, or not be asked — and the client
// is told so: an operator decides.
const MaxElicitArgsBytes = 2000

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

// waitKey names one wait of a call: its id, kind and requested_at ("": no
// wait). A call asked anew has another key.
func waitKey(it *workflows.Interrupt) string {
	if it == nil {
		return ""
	}
	return fmt.Sprintf("%s/%s/%d", it.CallID, it.Kind, it.RequestedAt.UnixNano())
}

// question is the message that asks the client's user to decide it, a wait
// of run id; or, when it must not be asked by elicitation, "" and why not
// (said to the client: an operator decides).
func question(id string, it workflows.Interrupt) (msg, notAsked string) {
	operator := fmt.Sprintf("an operator decides: toolgate approve %s %s", id, it.CallID)
	if it.Kind != workflows.KindGate {
		return "", fmt.Sprintf("not asked by elicitation: call %s (%s) waits on the tool's own question (%s), which is for a reviewer, not for this client's user; %s",
			it.CallID, it.Tool, it.Kind, operator)
	}
	args := it.CallArgs
	if len(bytes.TrimSpace(args)) == 0 { // as the digest counts them: {}
		args = json.RawMessage("{}")
	}
	canon, err := tool.Canonical(args)
	if err == nil {
		var digest string
		if digest, err = tool.Digest(it.Tool, args); err == nil && digest != it.ArgsDigest {
			err = fmt.Errorf("their digest %s is not the call's args_digest %s", digest, it.ArgsDigest)
		}
	}
	if err != nil {
		return "", fmt.Sprintf("not asked by elicitation: call %s's arguments cannot be shown whole (%s); %s", it.CallID, text.Clip(err.Error(), 200), operator)
	}
	shown := showJSON(canon)
	if len(shown) > MaxElicitArgsBytes {
		return "", fmt.Sprintf("not asked by elicitation: the arguments are %d bytes, more than the %d a question shows whole; %s",
			len(shown), MaxElicitArgsBytes, operator)
	}
	msg = fmt.Sprintf("toolgate: call %s of run %s waits for a human's approval (%s).\n"+
		"Tool: %s\n"+
		"Arguments, whole (canonical JSON; every character that does not print as itself is escaped as \\uXXXX):\n"+
		"```json\n%s\n```\n"+
		"args_digest: %s\n"+
		"Approve this exact call?",
		it.CallID, id, showText(text.Clip(it.Reason, 200)), showText(it.Tool), shown, it.ArgsDigest)
	return msg, ""
}

// showJSON renders canonical JSON so that every rune of it can be seen:
// each rune hidden(r) says is hidden, and the backtick (which would end a
// Markdown code block), is written as the JSON escape \uXXXX (a pair of
// them above U+FFFF). Outside strings canonical JSON holds only printable
// ASCII, so the rendering is valid JSON of the same value.
func showJSON(canon []byte) string {
	var b strings.Builder
	for _, r := range string(canon) {
		if r == '`' || hidden(r) {
			writeEscape(&b, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// showText is s with every hidden rune (and the backtick) escaped as in
// showJSON.
func showText(s string) string { return showJSON([]byte(s)) }

// hidden reports whether r might not be seen as itself: a control or other
// non-graphic rune (unassigned, private use, a line or paragraph
// separator), a format character (category Cf: bidi overrides such as
// U+202E, zero-width spaces and joiners), a default-ignorable one (variation
// selectors, Hangul fillers) or a space other than U+0020.
func hidden(r rune) bool {
	switch {
	case r == ' ':
		return false
	case r == utf8.RuneError, !unicode.IsGraphic(r), unicode.Is(unicode.Zs, r):
		return true
	}
	return unicode.In(r, unicode.Cf, unicode.Co, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
}

// writeEscape writes r as a JSON \u escape, a UTF-16 surrogate pair above U+FFFF.
func writeEscape(b *strings.Builder, r rune) {
	if r > 0xFFFF {
		r -= 0x10000
		fmt.Fprintf(b, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		return
	}
	fmt.Fprintf(b, `\u%04x`, r)
}

// startElicit asks the client's user to decide it (elicit) until the
// returned function withdraws the question, or ctx is done.
func (s *Server) startElicit(ctx context.Context, ss *mcp.ServerSession, id, who, msg string, it workflows.Interrupt) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	go s.elicit(ctx, ss, id, who, msg, it)
	return cancel
}

// elicit asks the client's user to decide it, the call waiting in run id,
// with msg (question's), and sends the answer to the run as who's user's
// decision. A cancelled question, or one the request outlived, decides
// nothing.
func (s *Server) elicit(ctx context.Context, ss *mcp.ServerSession, id, who, msg string, it workflows.Interrupt) {
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
