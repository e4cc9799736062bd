package agui

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// Message ids the stream gives what it adds.
func callsMessageID(callID string) string  { return "calls-" + callID }
func resultMessageID(callID string) string { return "result-" + callID }
func answerMessageID(turn int) string      { return "answer-" + strconv.Itoa(turn) }

// callView is one call of the followed turn as the trace and state show it.
type callView struct {
	id, tool string
	args     json.RawMessage // as proposed
	last     *workflows.TraceRecord
	final    *workflows.TraceRecord // the record that ends it, if any
	waiting  bool                   // an open interrupt holds it
}

// terminal are the trace statuses that end a call (blocked only when a
// policy rule denied it: a "needs confirmation" block waits for a human).
var terminal = map[string]bool{
	workflows.TraceOK: true, workflows.TraceCacheHit: true, workflows.TraceResponded: true,
	workflows.TraceRejected: true, workflows.TraceCancelled: true, workflows.TraceExpired: true,
	workflows.TraceError: true, workflows.TraceFallback: true,
}

// callsOf lists the calls of turn, in the order they first appear: those
// with trace records of the turn, then waiting calls with none (a call the
// run took up after continuing as new).
func callsOf(trace []workflows.TraceRecord, st workflows.State, turn int) []*callView {
	var out []*callView
	byID := map[string]*callView{}
	for i := range trace {
		rec := &trace[i]
		if rec.Turn != turn || rec.CallID == "" || rec.Status == workflows.TraceGrant {
			continue
		}
		c := byID[rec.CallID]
		if c == nil {
			args := rec.Args
			if len(rec.OriginalArgs) > 0 {
				args = rec.OriginalArgs
			}
			c = &callView{id: rec.CallID, tool: rec.Tool, args: args}
			byID[rec.CallID] = c
			out = append(out, c)
		}
		if rec.Status == workflows.TraceShadow || workflows.Notice(rec.Status) {
			continue
		}
		c.last = rec
		if c.final == nil && (terminal[rec.Status] || rec.Status == workflows.TraceBlocked && (strings.HasPrefix(rec.Error, plan.DeniedByRule) || strings.HasPrefix(rec.Error, plan.DeniedByLedger))) {
			c.final = rec
		}
	}
	if st.Turn != turn {
		return out
	}
	for _, it := range st.Interrupts {
		c := byID[it.CallID]
		if c == nil {
			args := it.CallArgs
			if len(it.OriginalArgs) > 0 {
				args = it.OriginalArgs
			}
			c = &callView{id: it.CallID, tool: it.Tool, args: args}
			byID[it.CallID] = c
			out = append(out, c)
		}
		c.waiting = true
	}
	return out
}

// argsText is the exact text of a call's arguments ("{}" for none).
func argsText(args json.RawMessage) string {
	if len(args) == 0 {
		return "{}"
	}
	return string(args)
}

// outcomeText is what TOOL_CALL_RESULT says of a call's end: the result's
// JSON text, or what happened instead.
func outcomeText(rec *workflows.TraceRecord) string {
	by := rec.Approver
	if by == "" {
		by = "an approver"
	}
	switch rec.Status {
	case workflows.TraceOK, workflows.TraceCacheHit, workflows.TraceResponded:
		if len(rec.Result) == 0 {
			return "null"
		}
		return string(rec.Result)
	case workflows.TraceRejected:
		return withReason("not executed: rejected by "+by, rec.Reason)
	case workflows.TraceCancelled:
		return withReason("not executed: cancelled by "+by, rec.Reason)
	case workflows.TraceExpired:
		return withReason("not executed: expired", rec.Reason)
	case workflows.TraceBlocked:
		return withReason("not executed: blocked", rec.Error)
	case workflows.TraceError:
		return withReason("failed", rec.Error)
	case workflows.TraceFallback:
		return withReason("failed", rec.Error) + "; fell back to " + strings.TrimPrefix(rec.Reason, "falling back to ")
	}
	return fmt.Sprintf("no outcome recorded: its last status is %s", rec.Status)
}

func withReason(what, why string) string {
	if why = strings.TrimSpace(why); why == "" {
		return what
	}
	return what + ": " + why
}

// interrupt is AG-UI's Interrupt for a waiting call.
type interrupt struct {
	ID             string          `json:"id"`
	Reason         string          `json:"reason"`
	Message        string          `json:"message"`
	ToolCallID     string          `json:"toolCallId"`
	ResponseSchema json.RawMessage `json:"responseSchema"`
	ExpiresAt      string          `json:"expiresAt,omitempty"`
	Metadata       interruptMeta   `json:"metadata"`
}

// interruptMeta is what a front end needs to show a waiting call and to
// sign a decision for it.
type interruptMeta struct {
	ArgsDigest string            `json:"args_digest"`
	Tool       string            `json:"tool"`
	Kind       string            `json:"kind"`
	Rule       string            `json:"rule,omitempty"`
	Needs      *policy.Approvers `json:"needs,omitempty"`
	ApprovedBy []string          `json:"approved_by,omitempty"`
	CallArgs   json.RawMessage   `json:"call_args"`
	// OriginalArgs and EditedBy: an approver edited the arguments, and a
	// quorum is approving the edited ones.
	OriginalArgs json.RawMessage `json:"original_args,omitempty"`
	EditedBy     string          `json:"edited_by,omitempty"`
	// Asked is requested_at in Unix nanoseconds, in decimal: a signed
	// decision names it ("asked").
	Asked string `json:"asked"`
	// Signed: the run's decisions must be signed (metadata.token).
	Signed bool `json:"signed,omitempty"`
}

// ResponseSchema is the JSON schema of an interrupt's answer
// (resume[].payload).
const ResponseSchema = `{"type":"object","additionalProperties":false,"required":["approved"],"properties":{` +
	`"approved":{"type":"boolean","description":"true runs the call; false rejects it (it does not run)"},` +
	`"editedArgs":{"type":"object","description":"with approved true, for a call held at the gate: run it with these arguments instead (a full replacement, checked again)"},` +
	`"reason":{"type":"string","description":"a rejection's reason (the planner is told), or an approval's note"},` +
	`"data":{"type":"object","description":"with approved true, for a call held by its tool's own question: the answer the tool gets"},` +
	`"response":{"description":"with approved true: answer in the tool's place (the tool does not run; refused for a destructive tool unless a policy rule allows it)"}}}`

func toInterrupt(it workflows.Interrupt, signedRun bool) interrupt {
	why := strings.TrimSpace(it.Reason)
	if why == "" {
		why = "needs a decision"
	}
	out := interrupt{
		ID: InterruptID(it), Reason: "tool_call", ToolCallID: it.CallID,
		Message:        fmt.Sprintf("%s %s waits for a human: %s", it.Tool, it.CallID, why),
		ResponseSchema: json.RawMessage(ResponseSchema),
		Metadata: interruptMeta{ArgsDigest: it.ArgsDigest, Tool: it.Tool, Kind: string(it.Kind), Rule: it.Rule, Needs: it.Needs,
			ApprovedBy: it.ApprovedBy, CallArgs: it.CallArgs, OriginalArgs: it.OriginalArgs, EditedBy: it.EditedBy,
			Asked: strconv.FormatInt(it.RequestedAt.UnixNano(), 10), Signed: signedRun},
	}
	if len(out.Metadata.CallArgs) == 0 {
		out.Metadata.CallArgs = json.RawMessage("{}")
	}
	if !it.ExpiresAt.IsZero() {
		out.ExpiresAt = it.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	return out
}

func interruptsOf(st workflows.State) []interrupt {
	out := make([]interrupt, 0, len(st.Interrupts))
	for _, it := range st.Interrupts {
		out = append(out, toInterrupt(it, st.Policy))
	}
	return out
}

func snapshotOf(st workflows.State) stateSnapshotValue {
	return stateSnapshotValue{Status: st.Status, Turn: st.Turn, Calls: st.Calls, Interrupts: interruptsOf(st),
		Memo: memoStats{Entries: st.Memo.Entries, Bytes: st.Memo.Bytes, Hits: st.Memo.Hits, Misses: st.Memo.Misses}}
}
