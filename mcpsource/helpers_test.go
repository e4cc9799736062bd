package mcpsource

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/tool"
)

// objectSchema is the input schema of the test servers' tools.
var objectSchema = map[string]any{"type": "object"}

// testServer is an MCP server built with the SDK's own server package and
// served over streamable HTTP by an httptest server.
type testServer struct {
	t     *testing.T
	build func(*mcp.Server)
	http  *httptest.Server

	mu      sync.Mutex
	headers []http.Header // the headers of every HTTP request it got
}

// serve starts an MCP server whose tools build adds.
func serve(t *testing.T, build func(*mcp.Server)) *testServer {
	t.Helper()
	ts := &testServer{t: t, build: build}
	ts.http = httptest.NewServer(ts.handler())
	t.Cleanup(ts.stop)
	return ts
}

func (ts *testServer) handler() http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	ts.build(s)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		ts.headers = append(ts.headers, r.Header.Clone())
		ts.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// stop closes the server and every connection to it (a hanging SSE stream
// included, which httptest.Server.Close alone would wait for).
func (ts *testServer) stop() {
	ts.http.CloseClientConnections()
	ts.http.Close()
}

// restart stops the server and starts a new one (new sessions) on the same address.
func (ts *testServer) restart() {
	addr := ts.http.Listener.Addr().String()
	ts.stop()
	var ln net.Listener
	require.Eventually(ts.t, func() bool {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err == nil
	}, 5*time.Second, 20*time.Millisecond, "listening again on %s", addr)
	ts.http = httptest.NewUnstartedServer(ts.handler())
	ts.http.Listener.Close()
	ts.http.Listener = ln
	ts.http.Start()
}

func (ts *testServer) url() string { return ts.http.URL }

func (ts *testServer) seen() []http.Header {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]http.Header(nil), ts.headers...)
}

// addTool adds a tool with a raw handler.
func addTool(s *mcp.Server, name string, ann *mcp.ToolAnnotations, h mcp.ToolHandler) {
	s.AddTool(&mcp.Tool{Name: name, Description: "test tool " + name, InputSchema: objectSchema, Annotations: ann}, h)
}

// say is a handler whose result is text.
func say(text string) mcp.ToolHandler {
	return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return textResult(text), nil
	}
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func ptr[T any](v T) *T { return &v }

// open parses file (with the server's URL in place of URL) and opens it.
func open(t *testing.T, file string, opts Options) *Source {
	t.Helper()
	cfg, err := Parse([]byte(file))
	require.NoError(t, err)
	src, err := Open(context.Background(), cfg, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	return src
}

func find(t *testing.T, src *Source, name string) tool.Tool {
	t.Helper()
	for _, tt := range src.Tools() {
		if tt.Spec.Name == name {
			return tt
		}
	}
	require.Failf(t, "tool not registered", "%s", name)
	return tool.Tool{}
}

func listing(t *testing.T, src *Source, name string) Listing {
	t.Helper()
	for _, l := range src.List() {
		if l.Name == name {
			return l
		}
	}
	require.Failf(t, "tool not listed", "%s", name)
	return Listing{}
}

func registered(src *Source) []string {
	var names []string
	for _, tt := range src.Tools() {
		names = append(names, tt.Spec.Name)
	}
	return names
}

// run runs a registered tool outside an activity.
func run(t *testing.T, src *Source, name, key string, args string, approval *tool.Approval) (tool.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return find(t, src, name).Run(ctx, tool.Request{CallID: "c-1", IdempotencyKey: key, Args: json.RawMessage(args), Approval: approval})
}

// appErr is the temporal ApplicationError a tool's failure becomes.
func appErr(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	require.Error(t, err)
	var ae *temporal.ApplicationError
	require.True(t, errors.As(err, &ae), "want an ApplicationError, got %T: %v", err, err)
	return ae
}
