// Package mcpserve serves toolgate's gated tools to any MCP client: toolgate
// as an MCP server. Each tool a worker registers is listed with truthful
// annotations (a destructive tool is gated: a human approves each call), and
// each tools/call is proposed to a durable AgentRun whose planner is
// external (plan.KindExternal), where it goes gate → memo → run → fallback
// like every call. The run, not this server, decides: it validates the
// arguments, answers a repeated read from its memo and holds a destructive
// call until a human approves it.
//
// A caller's calls go to the run mcp-<caller>-<run name>: over HTTP the
// caller is the bearer token's name (a tokens file, LoadTokens), and the run
// name is the request's Toolgate-Run header, or its _meta "toolgate/run",
// or the MCP session's id; over stdio (ServeStdio) both are given. A client
// that names its run reaches the same run after a restart of toolgate or
// from a second connection, and a call proposed again with the same
// arguments (or the same _meta "toolgate/idempotency_key") attaches to the
// call proposed before instead of running twice. A call that has finished
// is reached by its id (_meta "toolgate/call_id"), which a waiting answer
// gives: a proposal without a key attaches only to an unfinished call.
//
// A tools/call stays open while its call waits for a human, up to
// Options.Wait, sending progress notifications if the client asked for
// them; after that it answers that the call is not run yet, how to approve
// it and how to wait again. The call itself is durable: it goes on whether
// or not the client is still there.
package mcpserve

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// Runs is what the server needs of toolgate's client (*client.Client has it).
type Runs interface {
	Propose(ctx context.Context, id string, start *workflows.RunInput, p workflows.Proposal, opts ...client.StartOption) (workflows.CallStatus, error)
	Call(ctx context.Context, id, callID string) (workflows.CallStatus, error)
	// Decide takes a decision asked of the client's user (ElicitApprovals).
	Decide(ctx context.Context, id string, approve bool, in workflows.DecisionInput, opts ...client.DecideOption) (workflows.DecisionResult, error)
}

// Defaults of Options.
const (
	DefaultWait                 = 3 * time.Minute
	DefaultProgress             = 5 * time.Second
	DefaultSessionTimeout       = time.Hour
	DefaultMaxSessionsPerToken  = 16
	DefaultMaxWaitingPerSession = 16
)

// Options configure a Server.
type Options struct {
	// Runs proposes calls and reads how they stand.
	Runs Runs
	// Tools are the worker's tools (worker.Options.Config().Tools).
	Tools []tool.Spec
	// Tokens are the bearer tokens HTTP accepts (LoadTokens); Handler
	// refuses to serve without them.
	Tokens *Tokens
	// Hosts are the Host header values HTTP answers to: "host:port", or
	// "host" for that host on any port (LoopbackHosts gives the listen
	// address's). Handler refuses to serve without one.
	Hosts []string
	// Origins are the browser origins (scheme://host[:port]) HTTP takes
	// requests from; a request with another Origin header is refused, one
	// without an Origin header (not from a browser) is not.
	Origins []string
	// Wait is how long a tools/call stays open for a call that waits for a
	// human or still runs (DefaultWait).
	Wait time.Duration
	// Progress is the time between progress notifications (DefaultProgress).
	Progress time.Duration
	// IdleTimeout is the idle_timeout of the runs this server starts (0:
	// the run's default, 24h).
	IdleTimeout time.Duration
	// Policy: the worker has an approval policy, so a run is started signed
	// by its caller, with the key_file of the caller's token if it has one.
	Policy bool
	// Keys are signing keys by caller name, besides the tokens' key_file
	// ones: the stdio caller's (toolgate mcp serve --stdio --as NAME --key FILE).
	Keys map[string]ed25519.PrivateKey
	// ElicitApprovals lets a client that supports MCP elicitation ask its
	// own user to decide a call that waits (elicit.go). The operator opts
	// in; it is refused with Policy, under which every decision is signed
	// by an approver the policy names, which an agent's host is not.
	ElicitApprovals bool
	// MaxSessionsPerToken bounds the HTTP sessions one token has open
	// (DefaultMaxSessionsPerToken).
	MaxSessionsPerToken int
	// MaxWaitingPerSession bounds the tools/call requests one session has
	// open at once (DefaultMaxWaitingPerSession).
	MaxWaitingPerSession int
	// SessionTimeout closes an HTTP session that sent no request for this
	// long (DefaultSessionTimeout; negative: never).
	SessionTimeout time.Duration
	// Logger logs what the server does (nil: nothing).
	Logger *slog.Logger
	// Name and Version are the implementation info sent to clients
	// (default "toolgate" and "dev").
	Name, Version string
}

// Server serves the tools of Options.Tools over MCP.
type Server struct {
	opts  Options
	tools map[string]tool.Spec
	keys  map[string]ed25519.PrivateKey // token name → signing key (with Policy)
	http  *mcp.Server                   // the server HTTP sessions share

	mu       sync.Mutex
	open     map[*mcp.ServerSession]int // tools/call requests open, per session
	sessions map[string]string          // HTTP session id → token name
	pending  map[string]int             // token name → sessions being opened
}

// New checks o and makes a Server.
func New(o Options) (*Server, error) {
	if o.Runs == nil {
		return nil, errors.New("mcp server: no Runs to propose calls to")
	}
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.Progress <= 0 {
		o.Progress = DefaultProgress
	}
	if o.MaxSessionsPerToken <= 0 {
		o.MaxSessionsPerToken = DefaultMaxSessionsPerToken
	}
	if o.MaxWaitingPerSession <= 0 {
		o.MaxWaitingPerSession = DefaultMaxWaitingPerSession
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ElicitApprovals && o.Policy {
		return nil, errors.New("mcp server: approvals through elicitation are refused under a policy: the agent's host is not an authenticated approver, " +
			"and a policy takes only decisions signed by the approvers it names")
	}
	if o.Name == "" {
		o.Name = "toolgate"
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	s := &Server{opts: o, tools: map[string]tool.Spec{}, keys: map[string]ed25519.PrivateKey{},
		open: map[*mcp.ServerSession]int{}, sessions: map[string]string{}, pending: map[string]int{}}
	for _, spec := range o.Tools {
		if _, dup := s.tools[spec.Name]; dup {
			return nil, fmt.Errorf("mcp server: two tools named %s", spec.Name)
		}
		if _, err := inputSchema(spec); err != nil {
			return nil, err
		}
		s.tools[spec.Name] = spec
	}
	if o.Policy && o.Tokens != nil {
		for _, e := range o.Tokens.entries {
			if e.KeyFile == "" {
				continue
			}
			key, err := signed.ReadPrivateKey(e.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("token %s's key_file: %w", e.Name, err)
			}
			s.keys[e.Name] = key
		}
	}
	for name, key := range o.Keys {
		s.keys[name] = key
	}
	var err error
	if s.http, err = s.newMCPServer(nil); err != nil {
		return nil, err
	}
	return s, nil
}

// caller is who calls: a token's name, or the stdio caller with its run.
type caller struct {
	name string
	run  string // stdio: the run name given to ServeStdio
}

// newMCPServer makes an MCP server with every tool; fixed, if not nil, is
// the caller of all its sessions (stdio), else each request's token says.
func (s *Server) newMCPServer(fixed *caller) (srv *mcp.Server, err error) {
	srv = mcp.NewServer(&mcp.Implementation{Name: s.opts.Name, Version: s.opts.Version}, &mcp.ServerOptions{
		Logger:       s.opts.Logger,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		Instructions: "toolgate runs each tool call through a gate, a memo, the run and a fallback. " +
			"A destructive tool's call waits for a human's approval; calling it again with the same arguments while it waits (or with the same " +
			MetaIdempotencyKey + " in _meta, at any time) waits for the same call, and never runs it twice.",
	})
	handler := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return s.callTool(ctx, req, fixed)
	}
	defer func() { // AddTool panics on a schema it refuses: say which tool instead
		if r := recover(); r != nil {
			srv, err = nil, fmt.Errorf("mcp server: %v", r)
		}
	}()
	for _, spec := range s.opts.Tools {
		srv.AddTool(mcpTool(spec), handler)
	}
	// A call of a tool the worker has not got goes to the run too, which
	// says why it refuses it, as it says for any other call.
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if r, ok := req.(*mcp.CallToolRequest); ok && r.Params != nil {
				if _, known := s.tools[r.Params.Name]; !known {
					return s.callTool(ctx, r, fixed)
				}
			}
			return next(ctx, method, req)
		}
	})
	return srv, nil
}

// DestructiveSuffix ends the description of a destructive tool.
const DestructiveSuffix = "(toolgate: each call waits for a human's approval)"

// mcpTool is spec as an MCP tool, with annotations that say what toolgate
// does with its calls.
func mcpTool(spec tool.Spec) *mcp.Tool {
	schema, _ := inputSchema(spec) // checked in New
	desc := spec.Description
	if spec.Destructive {
		if desc != "" {
			desc += " "
		}
		desc += DestructiveSuffix
	}
	destructive := spec.Destructive
	return &mcp.Tool{
		Name:        spec.Name,
		Description: desc,
		InputSchema: schema,
		Annotations: &mcp.ToolAnnotations{
			// Gated: a human approves each call.
			DestructiveHint: &destructive,
			ReadOnlyHint:    !spec.Destructive && len(spec.Invalidates) == 0,
			// A repeated read is answered from the run's memo.
			IdempotentHint: !spec.Destructive,
		},
	}
}

// inputSchema is spec's argument schema as MCP lists it: an object schema
// ({"type":"object"} if the spec has none; "type":"object" added if the
// schema does not say).
func inputSchema(spec tool.Spec) (json.RawMessage, error) {
	if len(spec.Schema) == 0 {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	var m map[string]any
	if err := json.Unmarshal(spec.Schema, &m); err != nil || m == nil {
		return nil, fmt.Errorf("mcp server: tool %s: its schema is not a JSON object", spec.Name)
	}
	switch t := m["type"]; t {
	case "object":
		return spec.Schema, nil
	case nil:
		m["type"] = "object"
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("mcp server: tool %s: %w", spec.Name, err)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("mcp server: tool %s: its schema's type is %v; MCP takes a tool's arguments as an object (\"type\": \"object\")", spec.Name, t)
	}
}

// runNamePattern is what a run's name may be.
var runNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func checkRunName(name, from string) error {
	if !runNamePattern.MatchString(name) {
		return fmt.Errorf("run name %.80q (%s): want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", name, from)
	}
	return nil
}

// WorkflowID is the workflow id of caller's run named run.
func WorkflowID(caller, run string) string { return "mcp-" + caller + "-" + run }

// ServeStdio serves MCP over in and out (one client: whoever started this
// process) until the client closes in or ctx is done. name is the caller
// (a name as tokens have) and runName the run its calls go to, unless a
// call's _meta "toolgate/run" names another.
func (s *Server) ServeStdio(ctx context.Context, name, runName string, in io.Reader, out io.Writer) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("stdio caller: %w", err)
	}
	if err := checkRunName(runName, "the stdio run"); err != nil {
		return err
	}
	srv, err := s.newMCPServer(&caller{name: name, run: runName})
	if err != nil {
		return err
	}
	err = srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}})
	if ctx.Err() != nil || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// enter counts a tools/call request of session ss as open, unless it has
// MaxWaitingPerSession open; leave counts it closed.
func (s *Server) enter(ss *mcp.ServerSession) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[ss] >= s.opts.MaxWaitingPerSession {
		return false
	}
	s.open[ss]++
	return true
}

func (s *Server) leave(ss *mcp.ServerSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[ss]--; s.open[ss] <= 0 {
		delete(s.open, ss)
	}
}
