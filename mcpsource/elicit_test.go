package mcpsource

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tool"
)

var accountSchema = map[string]any{
	"type":       "object",
	"properties": map[string]any{"account": map[string]any{"type": "string"}},
	"required":   []any{"account"},
}

// payServer's pay tool asks which account to pay from before it pays.
type payServer struct {
	*testServer
	mu      sync.Mutex
	actions []string
	content []map[string]any
	paid    atomic.Int32
}

func newPayServer(t *testing.T) *payServer {
	ps := &payServer{}
	ps.testServer = serve(t, func(s *mcp.Server) {
		addTool(s, "pay", nil, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Which account?", RequestedSchema: accountSchema})
			if err != nil {
				return nil, err
			}
			ps.mu.Lock()
			ps.actions = append(ps.actions, res.Action)
			ps.content = append(ps.content, res.Content)
			ps.mu.Unlock()
			if res.Action != "accept" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "not paid: " + res.Action}}}, nil
			}
			ps.paid.Add(1)
			return &mcp.CallToolResult{StructuredContent: map[string]any{"paid_from": res.Content["account"]}}, nil
		})
		addTool(s, "plain", nil, say("ok"))
		addTool(s, "twice", nil, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for _, q := range []string{"Which account?", "Really?"} {
				res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: q, RequestedSchema: accountSchema})
				if err != nil {
					return nil, err
				}
				if res.Action != "accept" {
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "not paid"}}}, nil
				}
			}
			ps.paid.Add(1)
			return textResult("paid"), nil
		})
	})
	return ps
}

func TestElicitationInterruptsThenTheAnswerIsAccepted(t *testing.T) {
	ps := newPayServer(t)
	src := open(t, "servers:\n  bank:\n    url: "+ps.url()+"\n", Options{})

	_, err := run(t, src, "bank__pay", "k-1", `{}`, nil)
	ae := appErr(t, err)
	assert.Equal(t, tool.TypeInterrupt, ae.Type())
	assert.Equal(t, tool.TypeInterrupt, tool.ErrorType(err))
	assert.True(t, ae.NonRetryable())
	var d tool.ErrorDetails
	require.NoError(t, ae.Details(&d))
	assert.Contains(t, d.Message, "MCP server bank asks: Which account?")
	assert.Contains(t, d.Message, `"account"`)
	assert.Contains(t, d.Message, `"required":["account"]`)
	assert.Contains(t, d.Message, "approve --data")
	assert.Zero(t, ps.paid.Load(), "nothing is paid before the human answers")

	// An approval at the gate is not an answer to the server's question.
	_, err = run(t, src, "bank__pay", "k-1", `{}`, &tool.Approval{Kind: tool.ApprovedAtGate, Data: json.RawMessage(`{"account":"A-9"}`)})
	assert.Equal(t, tool.TypeInterrupt, appErr(t, err).Type())
	assert.Zero(t, ps.paid.Load())

	res, err := run(t, src, "bank__pay", "k-1", `{}`, &tool.Approval{Approver: "ana", Kind: tool.ApprovedInterrupt, Data: json.RawMessage(`{"account":"A-1"}`)})
	require.NoError(t, err)
	assert.JSONEq(t, `{"paid_from":"A-1"}`, string(res.Result))
	assert.Equal(t, int32(1), ps.paid.Load())
	ps.mu.Lock()
	assert.Equal(t, []string{"cancel", "cancel", "accept"}, ps.actions)
	assert.Equal(t, map[string]any{"account": "A-1"}, ps.content[2])
	ps.mu.Unlock()

	// The answer belongs to that call only: the next call is asked again.
	_, err = run(t, src, "bank__pay", "k-2", `{}`, nil)
	assert.Equal(t, tool.TypeInterrupt, appErr(t, err).Type())
	_, err = run(t, src, "bank__plain", "k-3", `{}`, nil)
	require.NoError(t, err)
}

func TestElicitationApprovalWithoutDataStillInterrupts(t *testing.T) {
	ps := newPayServer(t)
	src := open(t, "servers:\n  bank:\n    url: "+ps.url()+"\n", Options{})
	_, err := run(t, src, "bank__pay", "k-1", `{}`, &tool.Approval{Kind: tool.ApprovedInterrupt})
	assert.Equal(t, tool.TypeInterrupt, appErr(t, err).Type())
	assert.Zero(t, ps.paid.Load())
}

func TestElicitationAnswerAnswersOneQuestion(t *testing.T) {
	ps := newPayServer(t)
	src := open(t, "servers:\n  bank:\n    url: "+ps.url()+"\n", Options{})
	_, err := run(t, src, "bank__twice", "k-1", `{}`, &tool.Approval{Kind: tool.ApprovedInterrupt, Data: json.RawMessage(`{"account":"A-1"}`)})
	ae := appErr(t, err)
	assert.Equal(t, tool.TypeInterrupt, ae.Type())
	assert.Contains(t, err.Error(), "Really?", "the approver answered the first question, not the second")
	assert.Zero(t, ps.paid.Load())
}

func TestElicitationMessageShowsURLMode(t *testing.T) {
	msg := elicitation("bank", &mcp.ElicitParams{Message: " Sign in ", URL: "https://bank.example/consent"})
	assert.Equal(t, "MCP server bank asks: Sign in (at https://bank.example/consent); reject to decline", msg)
	msg = elicitation("bank", &mcp.ElicitParams{Message: "Which?", RequestedSchema: accountSchema})
	assert.Contains(t, msg, "answer with approve --data matching {")
}

func TestConcurrentCallsOnOneServer(t *testing.T) {
	// Each session serves one call at a time, so an elicitation is known to
	// belong to its call: concurrent calls (more than the pool's sessions),
	// each with its own answer, each get theirs.
	ps := newPayServer(t)
	src := open(t, "servers:\n  bank:\n    url: "+ps.url()+"\n", Options{})
	var wg sync.WaitGroup
	errs := make([]error, 8)
	results := make([]json.RawMessage, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := &tool.Approval{Kind: tool.ApprovedInterrupt, Data: json.RawMessage(fmt.Sprintf(`{"account":"A-%d"}`, i))}
			res, err := run(t, src, "bank__pay", fmt.Sprintf("k-%d", i), `{}`, a)
			errs[i], results[i] = err, res.Result
		}()
	}
	wg.Wait()
	for i := range errs {
		require.NoError(t, errs[i])
		assert.JSONEq(t, fmt.Sprintf(`{"paid_from":"A-%d"}`, i), string(results[i]))
	}
}
