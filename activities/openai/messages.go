package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	oai "github.com/openai/openai-go/v3"

	"github.com/toolgate/toolgate/plan"
)

// How a plan.Request becomes chat messages for the model.

// systemPrompt explains the agent's job and the rules it is held to.
const systemPrompt = `You are the planner of an AI agent run by toolgate, a durable and safe tool executor.
Your job: reach the user's goal by calling the tools you are given, then answer the user.

How it works:
- Propose tool calls with the tool-calling interface. Calls you propose together run concurrently; you get each call's outcome as a tool message.
- Arguments must be a JSON object that matches the tool's parameter schema.
- Destructive tools (marked below and in their descriptions) never run without a human's approval of that exact call. The run pauses until a human decides; you will then learn whether the call ran or was rejected.
- A call that was rejected (or got no decision in time, which counts as a rejection) must not be proposed again with the same arguments. Read the reason, then change the plan, or explain to the user why you stopped.
- A call that failed tells you why; fix the arguments or choose another way. Do not repeat a failing call unchanged.
- A result marked "from the memo" is the stored result of the same call made earlier in this session.
- When you are done (or cannot go on), stop calling tools and answer the user in plain text.`

func systemMessage(tools []plan.ToolInfo) string {
	var destructive []string
	for _, t := range tools {
		if t.Destructive {
			destructive = append(destructive, t.Name)
		}
	}
	s := systemPrompt
	if len(destructive) > 0 {
		s += "\n\nDestructive tools in this run (each call needs a human's approval): " + strings.Join(destructive, ", ") + "."
	} else if len(tools) > 0 {
		s += "\n\nNone of the tools in this run is destructive."
	}
	return s
}

// buildMessages renders the goal and the transcript as Chat Completions
// messages. The run's call ids ("c-3") are used as tool_call ids, so each tool
// message pairs exactly with the call it answers. The sequence is always
// valid: an outcome missing for a call gets a placeholder tool message, and an
// outcome whose call is not in view (the transcript is trimmed to its most
// recent entries) is left out.
func buildMessages(req plan.Request) []oai.ChatCompletionMessageParamUnion {
	msgs := []oai.ChatCompletionMessageParamUnion{oai.SystemMessage(systemMessage(req.Tools))}

	// The goal opens the conversation unless the transcript starts with it.
	firstUser := -1
	for i, e := range req.Transcript {
		if e.Role == plan.RoleUser {
			firstUser = i
			break
		}
	}
	if req.Goal != "" && (firstUser < 0 || req.Transcript[firstUser].Text != req.Goal) {
		msgs = append(msgs, oai.UserMessage(req.Goal))
	}

	// pending: call ids of the last assistant message still waiting for an
	// outcome, in the order they were proposed.
	var pending []string
	pendingTool := map[string]string{}
	flush := func() {
		for _, id := range pending {
			msgs = append(msgs, oai.ToolMessage(
				fmt.Sprintf("no outcome was recorded for this call (%s); assume it did not run", pendingTool[id]), id))
		}
		pending = nil
		clear(pendingTool)
	}

	for _, e := range req.Transcript {
		switch e.Role {
		case plan.RoleUser:
			flush()
			if strings.TrimSpace(e.Text) == "" {
				continue
			}
			msgs = append(msgs, oai.UserMessage(e.Text))
		case plan.RoleAssistant:
			flush()
			if strings.TrimSpace(e.Text) == "" && len(e.Calls) == 0 {
				continue
			}
			var asst oai.ChatCompletionAssistantMessageParam
			if e.Text != "" {
				asst.Content.OfString = oai.String(e.Text)
			}
			for i, c := range e.Calls {
				id := c.ID
				if _, dup := pendingTool[id]; id == "" || dup {
					// Should not happen: tool_call ids must be unique.
					id = fmt.Sprintf("call-%d-%d", len(msgs), i)
				}
				asst.ToolCalls = append(asst.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
						ID: id,
						Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      c.Tool,
							Arguments: argumentsText(c.Args),
						},
					},
				})
				pending = append(pending, id)
				pendingTool[id] = c.Tool
			}
			msgs = append(msgs, oai.ChatCompletionMessageParamUnion{OfAssistant: &asst})
		case plan.RoleTool:
			i := indexOf(pending, e.CallID)
			if i < 0 {
				continue // its call is not in view, or it was answered already
			}
			pending = append(pending[:i], pending[i+1:]...)
			delete(pendingTool, e.CallID)
			msgs = append(msgs, oai.ToolMessage(outcomeText(e), e.CallID))
		}
	}
	flush()
	return msgs
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// argumentsText is a call's arguments as the model wrote them. Arguments that
// were not valid JSON travel as a JSON string (see decide); they are shown to
// the model as the text it wrote.
func argumentsText(args json.RawMessage) string {
	raw := bytes.TrimSpace(args)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// outcomeText tells the model, in words and JSON, what became of a call.
func outcomeText(e plan.Entry) string {
	text := outcomeWords(e)
	if note := strings.TrimSpace(e.Note); note != "" {
		text = note + "\n" + text
	}
	return text
}

// notExecuted starts what a planner is told of a call a human stopped.
const notExecuted = "not executed: "

func outcomeWords(e plan.Entry) string {
	result := strings.TrimSpace(string(e.Result))
	withResult := func(words string) string {
		if result == "" {
			return words + " (no result)"
		}
		return words + "; result:\n" + result
	}
	reason := strings.TrimSpace(e.Error)
	switch e.Status {
	case plan.StatusOK:
		return withResult("the call succeeded")
	case plan.StatusCacheHit:
		return withResult("the call succeeded; the result came from the memo (the same call was made earlier in this session)")
	case plan.StatusRejected, plan.StatusCancelled, plan.StatusExpired:
		// What a human decided, as the run says it ("not executed: rejected
		// by bob: wrong ticket"); runs of rules version 5 and earlier say it
		// without "not executed: ".
		if reason == "" {
			reason = e.Status + ": no reason given"
		}
		if !strings.HasPrefix(reason, notExecuted) {
			reason = notExecuted + reason
		}
		return reason
	case plan.StatusResponded: // the note (outcomeText) says who answered
		return "the tool did not run; the human's answer in its place:\n" + result
	case plan.StatusError:
		if reason == "" {
			reason = "no error message"
		}
		return "the call failed: " + reason
	case plan.StatusBlocked:
		if strings.HasPrefix(reason, plan.DeniedByRule) || strings.HasPrefix(reason, plan.DeniedByLedger) {
			return "the call was blocked: " + reason
		}
		s := "the call was blocked: this run does not allow destructive calls"
		if reason != "" {
			s += ": " + reason
		}
		return s
	default:
		s := "the call ended with status " + strconv.Quote(e.Status)
		if reason != "" {
			s += ": " + reason
		}
		if result != "" {
			s += "; result:\n" + result
		}
		return s
	}
}
