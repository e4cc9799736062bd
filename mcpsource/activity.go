package mcpsource

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.temporal.io/sdk/activity"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/tool"
)

// activity is the toolgate activity of one MCP tool: a tools/call with the
// call's idempotency key in _meta. isError is the call's error (the planner
// sees the text); structuredContent, or the text content, is the result; a
// lost connection or a server that exits is a retryable failure (the next
// attempt connects again). A destructive call's result is kept in the
// journal, so a retry after the server answered does not call it again. A
// result over tool.MaxResultBytes is returned (and journaled) as the marker of
// tool.ClipResult: the call is done, its result too big to keep.
func (c *conn) activity(name string, l Listing) tool.ActivityFunc {
	return func(ctx context.Context, req tool.Request) (tool.Response, error) {
		attempt := int32(1)
		if activity.IsActivity(ctx) {
			attempt = activity.GetInfo(ctx).Attempt
		}
		fail := func(err error) (tool.Response, error) { return tool.Response{}, tool.Failure(err, attempt) }
		if l.Destructive && c.opts.Journal != nil {
			if res, ok, err := c.opts.Journal.Get(ctx, req.IdempotencyKey); err != nil {
				return fail(fmt.Errorf("%s: reading the journal: %w", l.Name, err))
			} else if ok {
				return tool.Response{Result: res, Attempt: attempt}, nil
			}
		}
		var answer json.RawMessage
		if a := req.Approval; a != nil && a.Kind == tool.ApprovedInterrupt && len(a.Data) > 0 {
			answer = a.Data
		}
		args := req.Args
		if len(bytes.TrimSpace(args)) == 0 {
			args = json.RawMessage("{}")
		}
		res, asked, lost, err := c.callTool(ctx, name, args, req.IdempotencyKey, answer)
		switch {
		case asked != nil:
			return fail(tool.Interrupt(elicitation(c.name, asked)))
		case err != nil && lost:
			return fail(fmt.Errorf("%s: MCP server %s: %w", l.Name, c.name, err)) // retryable
		case err != nil:
			return fail(tool.Permanent(fmt.Errorf("%s: MCP server %s refused the call: %w", l.Name, c.name, err)))
		case res.IsError:
			return fail(tool.Permanent(fmt.Errorf("%s: %s", l.Name, text(res))))
		}
		out, err := result(res)
		if err != nil {
			return fail(tool.Permanent(fmt.Errorf("%s: %w", l.Name, err)))
		}
		// Bounded here already (the worker bounds every tool's result too),
		// so that the journal keeps what the run will keep: the marker of a
		// result over tool.MaxResultBytes.
		out = tool.ClipResult(out, tool.MaxResultBytes)
		if l.Destructive && c.opts.Journal != nil {
			if err := c.opts.Journal.Put(ctx, req.IdempotencyKey, out); err != nil {
				return fail(fmt.Errorf("%s: keeping the result in the journal: %w", l.Name, err))
			}
			if c.opts.AfterCall != nil {
				c.opts.AfterCall(l.Name, req.IdempotencyKey)
			}
		}
		return tool.Response{Result: out, Attempt: attempt}, nil
	}
}

// elicitation is the interrupt message of a server's request for input.
func elicitation(server string, p *mcp.ElicitParams) string {
	schema, _ := json.Marshal(p.RequestedSchema)
	msg := fmt.Sprintf("MCP server %s asks: %s", server, strings.TrimSpace(p.Message))
	if p.URL != "" {
		msg += " (at " + p.URL + ")"
	}
	if len(schema) > 0 && string(schema) != "null" {
		msg += "; answer with approve --data matching " + string(schema)
	}
	return msg + "; reject to decline"
}

// result is a tool's result as toolgate keeps it: its structuredContent, or
// its text content as a JSON string, or a description of other content.
func result(res *mcp.CallToolResult) (json.RawMessage, error) {
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, fmt.Errorf("encoding structuredContent: %w", err)
		}
		return b, nil
	}
	var parts []any
	allText := true
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			allText = false
			parts = append(parts, map[string]any{"type": "image", "mimeType": c.MIMEType, "bytes": len(c.Data)})
		case *mcp.AudioContent:
			allText = false
			parts = append(parts, map[string]any{"type": "audio", "mimeType": c.MIMEType, "bytes": len(c.Data)})
		default:
			allText = false
			b, _ := json.Marshal(c)
			parts = append(parts, json.RawMessage(b))
		}
	}
	if allText {
		return json.Marshal(text(res))
	}
	return json.Marshal(parts)
}

// text is the result's text content, joined.
func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(t.Text)
		}
	}
	if b.Len() == 0 {
		return "(no text)"
	}
	return b.String()
}

// Journal keeps destructive calls' results by idempotency key.
type Journal interface {
	Get(ctx context.Context, key string) (json.RawMessage, bool, error)
	Put(ctx context.Context, key string, result json.RawMessage) error
}
