package mcpsource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// conn is one server's connection. Calls on it take turns (mu), so an
// elicitation the server sends in the middle of a call is known to belong to
// that call; a connection that fails is dropped and made again by the next
// call (a stdio server is started again).
type conn struct {
	name string
	cfg  ServerConfig
	opts Options

	mu      sync.Mutex
	session *mcp.ClientSession

	call callState // the call in flight (mu held)
}

// callState is what the elicitation handler knows of the call in flight.
type callState struct {
	mu      sync.Mutex
	answer  json.RawMessage   // the approver's answer to an elicitation (approve --data), if any
	asked   *mcp.ElicitParams // what the server asked, if it asked and had no answer
	answers int               // answers given in this call
}

func newConn(name string, cfg ServerConfig, opts Options) *conn {
	return &conn{name: name, cfg: cfg, opts: opts}
}

// connected returns the session, connecting first if there is none.
func (c *conn) connected(ctx context.Context) (*mcp.ClientSession, error) {
	if c.session != nil {
		return c.session, nil
	}
	t, err := c.transport()
	if err != nil {
		return nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolgate", Version: "1"}, &mcp.ClientOptions{
		Logger:             c.opts.Logger,
		ElicitationHandler: c.elicit,
	})
	s, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	c.session = s
	return s, nil
}

// transport is the server's stdio or streamable-HTTP transport, with its
// ${VAR}s expanded from the environment.
func (c *conn) transport() (mcp.Transport, error) {
	var missing []string
	exp := func(s string) string {
		v, m := expand(s, c.opts.Getenv)
		missing = append(missing, m...)
		return v
	}
	if len(c.cfg.Command) > 0 {
		cmd := exec.Command(c.cfg.Command[0], c.cfg.Command[1:]...)
		cmd.Env = os.Environ()
		for _, k := range slices.Sorted(maps.Keys(c.cfg.Env)) {
			cmd.Env = append(cmd.Env, k+"="+exp(c.cfg.Env[k]))
		}
		cmd.Stderr = os.Stderr
		if len(missing) > 0 {
			return nil, fmt.Errorf("environment variables %s are empty", strings.Join(missing, ", "))
		}
		return &mcp.CommandTransport{Command: cmd}, nil
	}
	headers := http.Header{}
	for _, k := range slices.Sorted(maps.Keys(c.cfg.Headers)) {
		headers.Set(k, exp(c.cfg.Headers[k]))
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("environment variables %s are empty", strings.Join(missing, ", "))
	}
	return &mcp.StreamableClientTransport{Endpoint: c.cfg.URL,
		HTTPClient: &http.Client{Transport: withHeaders{headers, http.DefaultTransport}}}, nil
}

type withHeaders struct {
	h    http.Header
	next http.RoundTripper
}

func (w withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range w.h {
		r.Header[k] = v
	}
	return w.next.RoundTrip(r)
}

// drop forgets a failed connection: the next call connects again.
func (c *conn) drop() {
	if c.session != nil {
		_ = c.session.Close()
		c.session = nil
	}
}

func (c *conn) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drop()
	return nil
}

// listTools lists every tool the server serves, in name order.
func (c *conn) listTools(ctx context.Context) ([]*mcp.Tool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.connected(ctx)
	if err != nil {
		return nil, err
	}
	var tools []*mcp.Tool
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			c.drop()
			return nil, fmt.Errorf("listing tools: %w", err)
		}
		tools = append(tools, t)
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	return tools, nil
}

// callTool makes one tools/call, with the call's idempotency key in _meta
// and answer (if any) ready for an elicitation. lost reports a connection
// that failed (the call may be retried).
func (c *conn) callTool(ctx context.Context, name string, args json.RawMessage, key string, answer json.RawMessage) (res *mcp.CallToolResult, asked *mcp.ElicitParams, lost bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.connected(ctx)
	if err != nil {
		return nil, nil, true, err
	}
	c.call.mu.Lock()
	c.call.answer, c.call.asked, c.call.answers = answer, nil, 0
	c.call.mu.Unlock()
	res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args,
		Meta: mcp.Meta{MetaIdempotencyKey: key}})
	c.call.mu.Lock()
	asked = c.call.asked
	c.call.mu.Unlock()
	if err != nil {
		if answered(err) {
			return nil, asked, false, err // the server answered: an error of the call, not of the connection
		}
		c.drop()
		return nil, asked, true, err
	}
	return res, asked, false, nil
}

// JSON-RPC error codes the SDK gives failures of its own (they are not the
// server's answer): a request the transport could not deliver (connection
// refused, HTTP 429/502/503/504, a failed authorization), and a connection
// that is closing.
const (
	codeRejected      = -32005
	codeClientClosing = -32003
	codeServerClosing = -32004
)

// answered reports whether err is the server's JSON-RPC answer to the call,
// which calling again cannot change. The SDK reports a request that never
// reached the server as a JSON-RPC error too (code -32005, "rejected by
// transport"): that one is a lost connection, to be retried.
func answered(err error) bool {
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) {
		return false
	}
	switch wire.Code {
	case codeRejected, codeClientClosing, codeServerClosing:
		return false
	}
	return true
}

// MetaIdempotencyKey is the _meta key of a tools/call that holds the call's
// idempotency key, for servers that can use it.
const MetaIdempotencyKey = "toolgate/idempotency_key"

// elicit answers the server's request for input in the middle of a call: with
// the approver's answer once a human gave one (approve --data), otherwise by
// cancelling — the call then pauses the run as an interrupt that shows the
// server's message and schema.
func (c *conn) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	c.call.mu.Lock()
	defer c.call.mu.Unlock()
	if c.call.answer != nil && c.call.answers == 0 {
		var content map[string]any
		if err := json.Unmarshal(c.call.answer, &content); err == nil {
			c.call.answers++
			return &mcp.ElicitResult{Action: "accept", Content: content}, nil
		}
	}
	c.call.asked = req.Params
	return &mcp.ElicitResult{Action: "cancel"}, nil
}
