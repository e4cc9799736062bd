package mcpserve

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// harness is a Server over HTTP on a test server, with tokens for alice and bob.
type harness struct {
	runs       *fakeRuns
	srv        *Server
	url        string
	host       string
	alice, bob string
	tokens     string // the tokens file
}

func newHarness(t *testing.T, edit func(*Options)) *harness {
	t.Helper()
	h := &harness{runs: newFakeRuns(), tokens: filepath.Join(t.TempDir(), "tokens.json")}
	var err error
	if h.alice, err = NewToken(h.tokens, "alice", ""); err != nil {
		t.Fatal(err)
	}
	if h.bob, err = NewToken(h.tokens, "bob", ""); err != nil {
		t.Fatal(err)
	}
	toks, err := LoadTokens(h.tokens)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	h.host = ts.Listener.Addr().String()
	o := Options{Runs: h.runs, Tools: testTools, Tokens: toks, Hosts: LoopbackHosts(h.host), Origins: []string{"https://app.example"}}
	if edit != nil {
		edit(&o)
	}
	if h.srv, err = New(o); err != nil {
		t.Fatal(err)
	}
	handler, err := h.srv.Handler()
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = handler
	ts.Start()
	t.Cleanup(ts.Close)
	h.url = ts.URL + Path
	return h
}

// headers adds headers to every request.
type headers struct {
	base http.RoundTripper
	h    map[string]string
}

func (hd headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range hd.h {
		r.Header.Set(k, v)
	}
	return hd.base.RoundTrip(r)
}

// connect opens an MCP session with token (and the extra headers).
func (h *harness) connect(t *testing.T, token string, extra map[string]string, co *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	hd := map[string]string{"Authorization": "Bearer " + token}
	for k, v := range extra {
		hd[k] = v
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, co)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: headers{http.DefaultTransport, hd}}}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// raw sends one HTTP request to the server and answers its status and body.
func (h *harness) raw(t *testing.T, method, path string, hdr map[string]string, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, strings.TrimSuffix(h.url, Path)+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp, string(b)
}

// call calls tool with args (and _meta) and fails the test on a protocol error.
func call(t *testing.T, cs *mcp.ClientSession, name string, args any, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
