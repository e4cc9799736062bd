package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
	tlog "go.temporal.io/sdk/log"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
)

// The tools offered to the model, and how its reply becomes a plan.Decision.

// emptySchema is sent for a tool that declares no parameter schema.
func emptySchema() shared.FunctionParameters {
	return shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
}

// buildTools offers each registered tool as a function tool.
func buildTools(tools []plan.ToolInfo) []oai.ChatCompletionToolUnionParam {
	out := make([]oai.ChatCompletionToolUnionParam, 0, len(tools))
	for _, t := range tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schemaParameters(t.Schema)}
		desc := strings.TrimSpace(t.Description)
		if t.Destructive {
			if desc != "" {
				desc += " "
			}
			desc += "[destructive: every call needs a human's approval before it runs]"
		}
		if desc != "" {
			fn.Description = oai.String(desc)
		}
		out = append(out, oai.ChatCompletionFunctionTool(fn))
	}
	return out
}

// schemaParameters is a tool's JSON schema as function parameters; an empty
// (or unusable) schema becomes an object schema without properties.
func schemaParameters(schema json.RawMessage) shared.FunctionParameters {
	if len(bytes.TrimSpace(schema)) == 0 {
		return emptySchema()
	}
	// Plain float64 numbers: the library's encoder writes a json.Number as a string.
	var m map[string]any
	if err := json.Unmarshal(schema, &m); err != nil || len(m) == 0 {
		return emptySchema()
	}
	return shared.FunctionParameters(m)
}

// ---------------------------------------------------------------------------
// Response: the decision.

// decide turns the model's message into a decision and counts the calls with
// malformed arguments or unknown tools.
//
// Calls the model got wrong do not fail the activity, and no new protocol is
// invented for them: every call is returned as a tool.Proposal and the
// workflow, which validates arguments against the schema and rejects unknown
// tools anyway, answers the model with a clear error for that call.
//
//   - Arguments that are valid JSON are passed through exactly as given, even
//     when they break the tool's schema or name an unknown tool.
//   - Arguments that are not JSON at all are encoded as a JSON string value
//     (json.Marshal of the raw text): a proposal's Args must be valid JSON to
//     cross the activity boundary, and a string is not an object, so the
//     workflow's check rejects it ("arguments must be a JSON object").
//   - Empty arguments (some servers send "" for a tool without parameters)
//     mean {}.
//
// The planner validates each call itself too (each schema compiled once per
// Plan call), only to log what was wrong.
func decide(msg oai.ChatCompletionMessage, tools []plan.ToolInfo, logger tlog.Logger) (plan.Decision, int) {
	type rawCall struct{ name, args string }
	var calls []rawCall
	for _, tc := range msg.ToolCalls {
		switch tc.Type {
		case "custom":
			calls = append(calls, rawCall{tc.Custom.Name, tc.Custom.Input})
		default:
			args := tc.Function.Arguments
			if args == "" {
				// Some servers send the arguments as an object, not a string.
				if raw := strings.TrimSpace(tc.Function.JSON.Arguments.Raw()); strings.HasPrefix(raw, "{") {
					args = raw
				}
			}
			calls = append(calls, rawCall{tc.Function.Name, args})
		}
	}
	//lint:ignore SA1019 the deprecated single function_call is still sent by some local servers
	if fc := msg.FunctionCall; len(calls) == 0 && fc.Name != "" {
		calls = append(calls, rawCall{fc.Name, fc.Arguments})
	}

	if len(calls) > 0 {
		v := newValidator(tools)
		dec := plan.Decision{Calls: make([]tool.Proposal, 0, len(calls))}
		malformed := 0
		for _, c := range calls {
			args, problem := normalizeArgs(c.args)
			if problem == "" {
				problem = v.check(c.name, args)
			}
			if problem != "" {
				malformed++
				logger.Warn("openai planner: the model proposed a call the workflow will refuse",
					"tool", c.name, "problem", problem)
			}
			dec.Calls = append(dec.Calls, tool.Proposal{Tool: c.name, Args: args})
		}
		return dec, malformed
	}
	if msg.Refusal != "" {
		return plan.Decision{Answer: RefusedPrefix + msg.Refusal}, 0
	}
	if strings.TrimSpace(msg.Content) != "" {
		return plan.Decision{Answer: msg.Content}, 0
	}
	return plan.Decision{Answer: NoAnswer}, 0
}

// normalizeArgs returns the arguments to propose, and what is wrong with them
// when they are not JSON.
func normalizeArgs(s string) (json.RawMessage, string) {
	t := strings.TrimSpace(s)
	if t == "" {
		return json.RawMessage("{}"), ""
	}
	if json.Valid([]byte(t)) {
		return json.RawMessage(t), ""
	}
	b, _ := json.Marshal(s) // a string always marshals
	return json.RawMessage(b), "arguments are not valid JSON"
}

// validator checks proposed arguments against the tools' schemas with the
// workflow's own validator (tool.CompileSchema), compiling each schema once
// (for one Plan call).
type validator struct {
	tools    map[string]plan.ToolInfo
	compiled map[string]*tool.Schema
	failed   map[string]error
}

func newValidator(tools []plan.ToolInfo) *validator {
	v := &validator{
		tools:    make(map[string]plan.ToolInfo, len(tools)),
		compiled: map[string]*tool.Schema{},
		failed:   map[string]error{},
	}
	for _, t := range tools {
		v.tools[t.Name] = t
	}
	return v
}

func (v *validator) schema(name string) (*tool.Schema, error) {
	if s, ok := v.compiled[name]; ok {
		return s, nil
	}
	if err, ok := v.failed[name]; ok {
		return nil, err
	}
	raw := v.tools[name].Schema
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	s, err := tool.CompileSchema(raw)
	if err != nil {
		v.failed[name] = err
		return nil, err
	}
	v.compiled[name] = s
	return s, nil
}

// check returns what is wrong with a call's (valid JSON) arguments, or "".
func (v *validator) check(name string, args json.RawMessage) string {
	if _, ok := v.tools[name]; !ok {
		return fmt.Sprintf("unknown tool %q", name)
	}
	if !json.Valid(args) {
		return "arguments are not valid JSON"
	}
	if t := bytes.TrimSpace(args); len(t) == 0 || t[0] != '{' {
		return "arguments must be an object"
	}
	s, err := v.schema(name)
	if err != nil {
		return "" // the tool's own schema is unusable: leave it to the workflow
	}
	if err := s.Validate(args); err != nil {
		return oneLine(err.Error())
	}
	return ""
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// ---------------------------------------------------------------------------
// Errors.
