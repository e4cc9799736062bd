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

// DefaultSessions is how many sessions toolgate opens to one server at
// most, unless the file says otherwise (a server's sessions); MaxSessions
// bounds what it may say.
const (
	DefaultSessions = 4
	MaxSessions     = 32
)

// conn is one server's pool of client sessions. Each session serves one call
// at a time, so an elicitation the server sends on a session belongs to the
// call in flight on it; calls on different sessions run at once, so a call
// that hangs holds one session, never the server. The pool opens a session
// when a call finds none idle and fewer than its size are open, reuses idle
// ones, and drops one whose connection failed (the next call opens another;
// a stdio server is started again). For a stdio server each session is a
// process of its own.
type conn struct {
	name string
	cfg  ServerConfig
	opts Options

	slots chan struct{} // a token per call in flight: at most the pool's size

	mu     sync.Mutex
	idle   []*session            // connected, no call in flight; the most recently used last
	open   map[*session]struct{} // every connected session, idle or not
	closed bool
}

// session is one client session of a conn's pool and what its elicitation
// handler knows of the call in flight on it.
type session struct {
	cs   *mcp.ClientSession
	call callState
}

// callState is what the elicitation handler knows of the call in flight.
type callState struct {
	mu      sync.Mutex
	answer  json.RawMessage   // the approver's answer to an elicitation (approve --data), if any
	asked   *mcp.ElicitParams // what the server asked, if it asked and had no answer
	answers int               // answers given in this call
}

func newConn(name string, cfg ServerConfig, opts Options) *conn {
	size := cfg.Sessions
	if size <= 0 {
		size = DefaultSessions
	}
	return &conn{name: name, cfg: cfg, opts: opts, slots: make(chan struct{}, size), open: map[*session]struct{}{}}
}

// errClosed is the failure of a call on a Source that was closed.
var errClosed = errors.New("the MCP source is closed")

// acquire returns a session for one call: an idle one, or a new one while
// fewer than the pool's size are open; otherwise it waits for one (or ctx).
func (c *conn) acquire(ctx context.Context) (*session, error) {
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for one of the %d sessions to the server: %w", cap(c.slots), ctx.Err())
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		<-c.slots
		return nil, errClosed
	}
	if n := len(c.idle); n > 0 {
		s := c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		return s, nil
	}
	c.mu.Unlock()
	s, err := c.connect(ctx)
	if err != nil {
		<-c.slots
		return nil, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_ = s.cs.Close()
		<-c.slots
		return nil, errClosed
	}
	c.open[s] = struct{}{}
	c.mu.Unlock()
	return s, nil
}

// release gives a session back after a call: to the idle ones if it is
// healthy, else it is closed and forgotten (the next call opens another).
func (c *conn) release(s *session, healthy bool) {
	c.mu.Lock()
	_, tracked := c.open[s]
	keep := healthy && tracked && !c.closed
	if keep {
		c.idle = append(c.idle, s)
	} else {
		delete(c.open, s)
	}
	c.mu.Unlock()
	if !keep && tracked {
		_ = s.cs.Close()
	}
	<-c.slots
}

// connect opens a new session, its elicitation handler bound to it.
func (c *conn) connect(ctx context.Context) (*session, error) {
	t, err := c.transport()
	if err != nil {
		return nil, err
	}
	s := &session{}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolgate", Version: "1"}, &mcp.ClientOptions{
		Logger:             c.opts.Logger,
		ElicitationHandler: s.elicit,
	})
	timeout := c.cfg.connectTimeout()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cs, err := client.Connect(cctx, t, nil) // the session outlives cctx: the SDK detaches it
	if err != nil {
		if ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("connecting: no answer to initialize within %v (its connect_timeout): %w", timeout, err)
		}
		return nil, fmt.Errorf("connecting: %w", err)
	}
	s.cs = cs
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

// close disconnects every session, idle or in a call (a call in flight
// then fails as a lost connection; a stdio server is stopped).
func (c *conn) close() error {
	c.mu.Lock()
	c.closed = true
	open := c.open
	c.open, c.idle = map[*session]struct{}{}, nil
	c.mu.Unlock()
	var wg sync.WaitGroup
	for s := range open {
		wg.Go(func() { _ = s.cs.Close() })
	}
	wg.Wait()
	return nil
}

// listTools lists every tool the server serves, in name order: connecting,
// then listing, each within the server's connect_timeout.
func (c *conn) listTools(ctx context.Context) ([]*mcp.Tool, error) {
	s, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	timeout := c.cfg.connectTimeout()
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var tools []*mcp.Tool
	for t, err := range s.cs.Tools(lctx, nil) {
		if err != nil {
			c.release(s, false)
			if ctx.Err() == nil && errors.Is(lctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("listing tools: no complete answer within %v (its connect_timeout): %w", timeout, err)
			}
			return nil, fmt.Errorf("listing tools: %w", err)
		}
		tools = append(tools, t)
	}
	c.release(s, true)
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	return tools, nil
}

// callTool makes one tools/call on a session of its own, with the call's
// idempotency key in _meta and answer (if any) ready for an elicitation.
// lost reports a connection that failed (the call may be retried).
func (c *conn) callTool(ctx context.Context, name string, args json.RawMessage, key string, answer json.RawMessage) (res *mcp.CallToolResult, asked *mcp.ElicitParams, lost bool, err error) {
	s, err := c.acquire(ctx)
	if err != nil {
		return nil, nil, true, err
	}
	s.call.mu.Lock()
	s.call.answer, s.call.asked, s.call.answers = answer, nil, 0
	s.call.mu.Unlock()
	res, err = s.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args,
		Meta: mcp.Meta{MetaIdempotencyKey: key}})
	s.call.mu.Lock()
	asked = s.call.asked
	s.call.mu.Unlock()
	if err != nil {
		if answered(err) {
			c.release(s, true)
			return nil, asked, false, err // the server answered: an error of the call, not of the connection
		}
		c.release(s, false)
		return nil, asked, true, err
	}
	c.release(s, true)
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

// elicit answers the server's request for input in the middle of the call in
// flight on the session: with the approver's answer once a human gave one
// (approve --data), otherwise by cancelling — the call then pauses the run as
// an interrupt that shows the server's message and schema.
func (s *session) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	s.call.mu.Lock()
	defer s.call.mu.Unlock()
	if s.call.answer != nil && s.call.answers == 0 {
		var content map[string]any
		if err := json.Unmarshal(s.call.answer, &content); err == nil {
			s.call.answers++
			return &mcp.ElicitResult{Action: "accept", Content: content}, nil
		}
	}
	s.call.asked = req.Params
	return &mcp.ElicitResult{Action: "cancel"}, nil
}
