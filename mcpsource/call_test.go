package mcpsource

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tool"
)

// callServer records what each call got.
type callServer struct {
	*testServer
	mu    sync.Mutex
	metas []mcp.Meta
	args  []json.RawMessage
	calls atomic.Int32
}

func newCallServer(t *testing.T) *callServer {
	cs := &callServer{}
	cs.testServer = serve(t, func(s *mcp.Server) {
		record := func(req *mcp.CallToolRequest) {
			cs.calls.Add(1)
			cs.mu.Lock()
			defer cs.mu.Unlock()
			cs.metas = append(cs.metas, req.Params.Meta)
			cs.args = append(cs.args, req.Params.Arguments)
		}
		addTool(s, "structured", nil, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			record(req)
			var in map[string]any
			_ = json.Unmarshal(req.Params.Arguments, &in)
			return &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: "the text is not the result"}},
				StructuredContent: map[string]any{"id": 42, "got": in},
			}, nil
		})
		addTool(s, "text", nil, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			record(req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "line one"}, &mcp.TextContent{Text: `line "two"`}}}, nil
		})
		addTool(s, "fails", nil, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			record(req)
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "order 7 is already shipped"}}}, nil
		})
		addTool(s, "errs", nil, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			record(req)
			return nil, context.DeadlineExceeded // the SDK makes a handler's error an isError result
		})
	})
	return cs
}

func (cs *callServer) meta(i int) mcp.Meta {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.metas[i]
}

func callFile(url string) string {
	return "servers:\n  s:\n    url: " + url + "\n    tools:\n      structured: {destructive: false}\n"
}

func TestCallSendsTheIdempotencyKeyInMeta(t *testing.T) {
	cs := newCallServer(t)
	src := open(t, callFile(cs.url()), Options{})
	_, err := run(t, src, "s__structured", "wf/run/c-1", `{"q":1}`, nil)
	require.NoError(t, err)
	_, err = run(t, src, "s__text", "wf/run/c-2", ``, nil)
	require.NoError(t, err)
	assert.Equal(t, "wf/run/c-1", cs.meta(0)[MetaIdempotencyKey])
	assert.Equal(t, "wf/run/c-2", cs.meta(1)[MetaIdempotencyKey])
	assert.Equal(t, "toolgate/idempotency_key", MetaIdempotencyKey)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	assert.JSONEq(t, `{"q":1}`, string(cs.args[0]))
	assert.JSONEq(t, `{}`, string(cs.args[1]), "no arguments are sent as an empty object")
}

func TestCallStructuredContentIsTheResult(t *testing.T) {
	cs := newCallServer(t)
	src := open(t, callFile(cs.url()), Options{})
	res, err := run(t, src, "s__structured", "k", `{"q":"x"}`, nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":42,"got":{"q":"x"}}`, string(res.Result))
	assert.Equal(t, int32(1), res.Attempt)
}

func TestCallTextContentIsAJSONString(t *testing.T) {
	cs := newCallServer(t)
	src := open(t, callFile(cs.url()), Options{})
	res, err := run(t, src, "s__text", "k", `{}`, nil)
	require.NoError(t, err)
	var s string
	require.NoError(t, json.Unmarshal(res.Result, &s), "result %s", res.Result)
	assert.Equal(t, "line one\nline \"two\"", s)
}

func TestCallIsErrorIsAPermanentFailureWithTheServersText(t *testing.T) {
	cs := newCallServer(t)
	src := open(t, callFile(cs.url()), Options{})
	for _, name := range []string{"s__fails", "s__errs"} {
		_, err := run(t, src, name, "k-"+name, `{}`, nil)
		ae := appErr(t, err)
		assert.Equal(t, tool.TypeToolFailure, ae.Type(), name)
		assert.True(t, ae.NonRetryable(), name)
		assert.Equal(t, tool.TypeToolFailure, tool.ErrorType(err), name)
		assert.Contains(t, err.Error(), name)
		var d tool.ErrorDetails
		require.NoError(t, ae.Details(&d))
		assert.Equal(t, int32(1), d.Attempt)
	}
	_, err := run(t, src, "s__fails", "k", `{}`, nil)
	assert.Contains(t, err.Error(), "order 7 is already shipped")
	assert.Equal(t, int32(3), cs.calls.Load())
}

func TestCallUnknownToolOnTheServerIsPermanent(t *testing.T) {
	// The server stops serving a tool it listed: it answers the call with a
	// JSON-RPC error, which retrying cannot fix.
	var srv *mcp.Server
	ts := serve(t, func(s *mcp.Server) {
		srv = s
		addTool(s, "gone", nil, say("here"))
	})
	src := open(t, "servers:\n  s:\n    url: "+ts.url()+"\n", Options{})
	srv.RemoveTools("gone")
	_, err := run(t, src, "s__gone", "k", `{}`, nil)
	ae := appErr(t, err)
	assert.True(t, ae.NonRetryable(), "%v", err)
	assert.Contains(t, err.Error(), "refused the call")
}

func TestCallReconnectsAfterTheServerGoesAway(t *testing.T) {
	cs := newCallServer(t)
	src := open(t, callFile(cs.url()), Options{})
	_, err := run(t, src, "s__text", "k-1", `{}`, nil)
	require.NoError(t, err)

	addr := cs.http.Listener.Addr().String()
	cs.stop()
	_, err = run(t, src, "s__text", "k-2", `{}`, nil)
	ae := appErr(t, err)
	assert.Equal(t, tool.TypeToolError, ae.Type(), "%v", err)
	assert.False(t, ae.NonRetryable(), "a lost server is retryable: %v", err)
	assert.Contains(t, err.Error(), "MCP server s")

	cs.restart()
	require.Equal(t, addr, cs.http.Listener.Addr().String())
	res, err := run(t, src, "s__text", "k-3", `{}`, nil)
	require.NoError(t, err)
	assert.JSONEq(t, `"line one\nline \"two\""`, string(res.Result))
}

func TestCallAfterTheServerRestartedBetweenCalls(t *testing.T) {
	// The server restarts (forgetting its sessions) while no call is in
	// flight: the next call must not be a permanent failure.
	cs := newCallServer(t)
	src := open(t, callFile(cs.url()), Options{})
	_, err := run(t, src, "s__text", "k-1", `{}`, nil)
	require.NoError(t, err)
	cs.restart()

	_, err = run(t, src, "s__text", "k-2", `{}`, nil)
	if err != nil {
		ae := appErr(t, err)
		require.False(t, ae.NonRetryable(), "a forgotten session is retryable: %v", err)
		_, err = run(t, src, "s__text", "k-2", `{}`, nil)
	}
	require.NoError(t, err)
}
