package agui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/sorted"
	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// Bounds on a request, besides MaxBodyBytes.
const (
	// MaxMessages bounds the messages of a request.
	MaxMessages = 1000
	// MaxToolCalls bounds the tool calls of one assistant message.
	MaxToolCalls = workflows.MaxCallsPerStep
	// MaxResumeEntries bounds a resume.
	MaxResumeEntries = 100
	// MaxTools and MaxContext bound the (ignored) tools and context.
	MaxTools   = 256
	MaxContext = 256
	// MaxIDBytes bounds a message's or a tool call's id.
	MaxIDBytes = 256
)

var (
	threadIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)
	runIDPattern    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// runAgentInput is AG-UI's RunAgentInput. Messages and resume entries are
// kept as their JSON (re-sent as given in MESSAGES_SNAPSHOT, hashed into
// update ids) and decoded one by one.
type runAgentInput struct {
	ThreadID        string            `json:"threadId"`
	RunID           string            `json:"runId"`
	ParentRunID     string            `json:"parentRunId,omitempty"`
	ProtocolVersion string            `json:"protocolVersion,omitempty"`
	State           json.RawMessage   `json:"state,omitempty"`
	Messages        []json.RawMessage `json:"messages"`
	Tools           []toolDef         `json:"tools,omitempty"`
	Context         []contextItem     `json:"context,omitempty"`
	ForwardedProps  json.RawMessage   `json:"forwardedProps,omitempty"`
	Resume          []json.RawMessage `json:"resume,omitempty"`
}

// toolDef and contextItem are decoded to refuse what is malformed, and
// otherwise ignored: the run's tools are the worker's.
type toolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

type contextItem struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

// message is any AG-UI message: the fields of every role's schema. Which
// fields a role may carry is checked from its keys (roleFields).
type message struct {
	ID             string          `json:"id"`
	Role           string          `json:"role"`
	Content        json.RawMessage `json:"content,omitempty"`
	Name           string          `json:"name,omitempty"`
	ToolCalls      []toolCall      `json:"toolCalls,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	Error          string          `json:"error,omitempty"`
	EncryptedValue string          `json:"encryptedValue,omitempty"`
	ActivityType   string          `json:"activityType,omitempty"`
	SubagentRunID  json.RawMessage `json:"subagentRunId,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
}

type toolCall struct {
	ID             string          `json:"id"`
	Type           string          `json:"type"`
	Function       function        `json:"function"`
	EncryptedValue string          `json:"encryptedValue,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
}

type function struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type textPart struct {
	Type     string          `json:"type"`
	ID       string          `json:"id,omitempty"`
	Text     string          `json:"text"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// roleFields are the keys each role's schema has, besides id and role.
var roleFields = map[string][]string{
	"user":      {"content", "name", "encryptedValue", "metadata", "subagentRunId"},
	"assistant": {"content", "name", "encryptedValue", "metadata", "subagentRunId", "toolCalls"},
	"tool":      {"content", "toolCallId", "error", "encryptedValue", "metadata", "subagentRunId"},
	"system":    {"content", "name", "encryptedValue", "metadata", "subagentRunId"},
	"developer": {"content", "name", "encryptedValue", "metadata", "subagentRunId"},
	"reasoning": {"content", "encryptedValue", "metadata", "subagentRunId"},
	"activity":  {"content", "activityType", "metadata", "subagentRunId"},
}

// request is a POST's input, checked.
type request struct {
	in        runAgentInput
	users     []string        // the user messages' text, in order
	calls     map[string]bool // tool call ids of the assistant messages
	results   map[string]bool // toolCallId of the tool messages
	ids       map[string]bool // message ids
	resume    []resumeEntry
	resumeRaw []json.RawMessage
}

// badRequest is a request refused before anything is looked up: an HTTP
// status and why.
type badRequest struct {
	status int
	msg    string
}

func (e *badRequest) Error() string { return e.msg }

func refuse(status int, format string, args ...any) *badRequest {
	return &badRequest{status: status, msg: fmt.Sprintf(format, args...)}
}

// parseRequest decodes body exactly (tool.DecodeExact: no unknown field, no
// key twice or in another case, nothing after the value) and checks every
// bound.
func parseRequest(body []byte) (*request, *badRequest) {
	r := &request{calls: map[string]bool{}, results: map[string]bool{}, ids: map[string]bool{}}
	if err := tool.DecodeExact(body, &r.in); err != nil {
		return nil, refuse(400, "the body is not an AG-UI RunAgentInput: %s", text.Clip(err.Error(), 300))
	}
	var top map[string]json.RawMessage
	_ = json.Unmarshal(body, &top) // decoded above
	for _, k := range []string{"threadId", "runId", "messages"} {
		if _, ok := top[k]; !ok {
			return nil, refuse(400, "RunAgentInput: %s is required", k)
		}
	}
	in := &r.in
	switch {
	case !threadIDPattern.MatchString(in.ThreadID):
		return nil, refuse(400, "threadId %q: want 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit", text.Clip(in.ThreadID, 120))
	case !runIDPattern.MatchString(in.RunID):
		return nil, refuse(400, "runId %q: want 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", text.Clip(in.RunID, 140))
	case in.ParentRunID != "" && !runIDPattern.MatchString(in.ParentRunID):
		return nil, refuse(400, "parentRunId %q: want 1 to 128 letters, digits, '.', '_' or '-'", text.Clip(in.ParentRunID, 140))
	case len(in.ProtocolVersion) > 32:
		return nil, refuse(400, "protocolVersion: at most 32 bytes")
	case len(in.Messages) > MaxMessages:
		return nil, refuse(400, "messages: %d, at most %d", len(in.Messages), MaxMessages)
	case len(in.Tools) > MaxTools:
		return nil, refuse(400, "tools: %d, at most %d (they are ignored: the run's tools are the worker's)", len(in.Tools), MaxTools)
	case len(in.Context) > MaxContext:
		return nil, refuse(400, "context: %d, at most %d (it is ignored)", len(in.Context), MaxContext)
	case len(in.Resume) > MaxResumeEntries:
		return nil, refuse(400, "resume: %d entries, at most %d", len(in.Resume), MaxResumeEntries)
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"state", in.State}, {"forwardedProps", in.ForwardedProps}} {
		if isNull(f.raw) {
			return nil, refuse(400, "%s: null is refused (leave the field out)", f.name)
		}
	}
	for i, raw := range in.Messages {
		if err := r.addMessage(i, raw); err != nil {
			return nil, err
		}
	}
	seen := map[string]int{}
	for i, raw := range in.Resume {
		e, err := parseResumeEntry(i, raw)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[e.InterruptID]; dup {
			return nil, refuse(400, "resume[%d]: interrupt %q is answered by resume[%d] already: answer each interrupt once", i, text.Clip(e.InterruptID, 100), j)
		}
		seen[e.InterruptID] = i
		r.resume = append(r.resume, e)
		r.resumeRaw = append(r.resumeRaw, raw)
	}
	return r, nil
}

// addMessage checks messages[i] and notes what the stream needs of it.
func (r *request) addMessage(i int, raw json.RawMessage) *badRequest {
	at := fmt.Sprintf("messages[%d]", i)
	var m message
	if err := tool.DecodeExact(raw, &m); err != nil {
		return refuse(400, "%s: %s", at, text.Clip(err.Error(), 300))
	}
	allowed, ok := roleFields[m.Role]
	if !ok {
		return refuse(400, "%s: role %q: want user, assistant, tool, system, developer, reasoning or activity", at, text.Clip(m.Role, 40))
	}
	var keys map[string]json.RawMessage
	_ = json.Unmarshal(raw, &keys) // decoded above
	for _, k := range sorted.Keys(keys) {
		if k != "id" && k != "role" && !slices.Contains(allowed, k) {
			return refuse(400, "%s: a %s message has no field %q", at, m.Role, text.Clip(k, 60))
		}
		if isNull(keys[k]) {
			return refuse(400, "%s.%s: null is refused (leave the field out)", at, text.Clip(k, 60))
		}
	}
	if err := checkID(at+".id", m.ID); err != nil {
		return err
	}
	if r.ids[m.ID] {
		return refuse(400, "%s: id %q is another message's too: message ids are unique", at, text.Clip(m.ID, 100))
	}
	r.ids[m.ID] = true
	if len(m.Metadata) > 0 && !isObject(m.Metadata) {
		return refuse(400, "%s.metadata: want an object", at)
	}
	if len(m.SubagentRunID) > 0 {
		var s string
		if json.Unmarshal(m.SubagentRunID, &s) != nil {
			return refuse(400, "%s.subagentRunId: want a string", at)
		}
	}
	_, hasContent := keys["content"]
	switch m.Role {
	case "user":
		t, err := contentText(at, m.Content, hasContent)
		if err != nil {
			return err
		}
		switch {
		case strings.TrimSpace(t) == "":
			return refuse(400, "%s: a user message without text: a run takes text", at)
		case len(t) > workflows.MaxMessageBytes:
			return refuse(400, "%s: a user message of %d bytes, at most %d", at, len(t), workflows.MaxMessageBytes)
		}
		r.users = append(r.users, t)
	case "assistant":
		if hasContent && !isString(m.Content) {
			return refuse(400, "%s.content: want a string", at)
		}
		if len(m.ToolCalls) > MaxToolCalls {
			return refuse(400, "%s.toolCalls: %d, at most %d", at, len(m.ToolCalls), MaxToolCalls)
		}
		for j, tc := range m.ToolCalls {
			tat := fmt.Sprintf("%s.toolCalls[%d]", at, j)
			if err := checkID(tat+".id", tc.ID); err != nil {
				return err
			}
			if tc.Type != "function" {
				return refuse(400, "%s.type %q: want \"function\"", tat, text.Clip(tc.Type, 40))
			}
			if len(tc.Metadata) > 0 && !isObject(tc.Metadata) {
				return refuse(400, "%s.metadata: want an object", tat)
			}
			r.calls[tc.ID] = true
		}
	case "tool":
		if _, err := contentText(at, m.Content, hasContent); err != nil {
			return err
		}
		if err := checkID(at+".toolCallId", m.ToolCallID); err != nil {
			return err
		}
		r.results[m.ToolCallID] = true
	case "activity":
		if m.ActivityType == "" || !isObject(m.Content) {
			return refuse(400, "%s: an activity message needs activityType and an object content", at)
		}
	default: // system, developer, reasoning: text the run does not take
		if !isString(m.Content) {
			return refuse(400, "%s.content: want a string", at)
		}
	}
	return nil
}

// contentText is a user or tool message's content as text: a string, or
// text parts (joined by newlines). Other parts are refused: a run takes text.
func contentText(at string, raw json.RawMessage, present bool) (string, *badRequest) {
	if !present {
		return "", refuse(400, "%s.content is required", at)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return "", refuse(400, "%s.content: want a string or an array of text parts", at)
	}
	texts := make([]string, 0, len(parts))
	for j, p := range parts {
		var tp textPart
		if err := tool.DecodeExact(p, &tp); err != nil || tp.Type != "text" {
			return "", refuse(400, "%s.content[%d]: only text parts {\"type\":\"text\",\"text\":…} are taken: a run takes text", at, j)
		}
		texts = append(texts, tp.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// checkID refuses an empty or oversized id, or one with control characters.
func checkID(at, id string) *badRequest {
	switch {
	case id == "":
		return refuse(400, "%s is required", at)
	case len(id) > MaxIDBytes:
		return refuse(400, "%s: %d bytes, at most %d", at, len(id), MaxIDBytes)
	case !utf8.ValidString(id) || strings.IndexFunc(id, unicode.IsControl) >= 0:
		return refuse(400, "%s %q: control characters are refused", at, text.Clip(id, 100))
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func isString(raw json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil
}

func isObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{'
}
