package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/internal/webguard"
)

// Path is where Handler serves MCP; every other path is 404.
const Path = "/mcp"

// MaxRequestBytes bounds the body of a request.
const MaxRequestBytes = 1 << 20

// sessionHeader is the streamable transport's session id header.
const sessionHeader = "Mcp-Session-Id"

// Handler serves MCP's streamable HTTP transport at Path: stateful sessions
// (a dropped event stream resumes with Last-Event-ID), each bound to the
// bearer token that opened it. It refuses, each with a reason: a Host not
// in Options.Hosts or a browser Origin not in Options.Origins (403); a
// missing or unknown token (401); a session of another token (403); a new
// session past Options.MaxSessionsPerToken (429). It needs Options.Tokens
// and Options.Hosts.
func (s *Server) Handler() (http.Handler, error) {
	if s.opts.Tokens == nil {
		return nil, errors.New("mcp server over HTTP needs a tokens file: make one with `toolgate mcp token new NAME --tokens FILE`")
	}
	if len(s.opts.Hosts) == 0 {
		return nil, errors.New("mcp server over HTTP needs the host names it answers to (Options.Hosts; LoopbackHosts gives the listen address's)")
	}
	origins := map[string]bool{}
	for _, o := range s.opts.Origins {
		n, err := webguard.NormalOrigin(o)
		if err != nil {
			return nil, err
		}
		origins[n] = true
	}
	timeout := s.opts.SessionTimeout
	if timeout < 0 {
		timeout = 0
	}
	streamable := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.http }, &mcp.StreamableHTTPOptions{
		EventStore:          mcp.NewMemoryEventStore(nil),
		MaxRequestBodyBytes: MaxRequestBytes,
		SessionTimeout:      timeout,
		Logger:              s.opts.Logger,
	})
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		e, ok := s.opts.Tokens.Lookup(token)
		if !ok {
			return nil, fmt.Errorf("%w: not a token of %s", auth.ErrInvalidToken, s.opts.Tokens.File())
		}
		return &auth.TokenInfo{UserID: e.Name}, nil
	}
	// The SDK's middleware puts the token's info where tool calls find it
	// (RequestExtra.TokenInfo); front has already refused, with a reason,
	// what it would refuse.
	inner := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(s.bind(streamable))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.front(w, r, origins, inner)
	}), nil
}

// front checks the path, the Host, the Origin and the bearer token.
func (s *Server) front(w http.ResponseWriter, r *http.Request, origins map[string]bool, next http.Handler) {
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Path != Path {
		writeError(w, http.StatusNotFound, "not found: MCP is served at "+Path)
		return
	}
	if !webguard.HostAllowed(s.opts.Hosts, r.Host) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("host %q is not one this server answers to: connect to %s, or start it with --host %s",
			text.Clip(r.Host, 100), s.opts.Hosts[0], text.Clip(webguard.HostOf(r.Host), 100)))
		return
	}
	if o := r.Header.Get("Origin"); o != "" {
		if n, err := webguard.NormalOrigin(o); err != nil || !origins[n] {
			writeError(w, http.StatusForbidden, fmt.Sprintf("origin %q may not call this server: a page of another site is refused; start it with --origin %s if that page may",
				text.Clip(o, 100), text.Clip(o, 100)))
			return
		}
	}
	fields := strings.Fields(r.Header.Get("Authorization"))
	if len(fields) != 2 || !strings.EqualFold(fields[0], "Bearer") {
		w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate"`)
		writeError(w, http.StatusUnauthorized, "no bearer token: send Authorization: Bearer TOKEN, a token of `toolgate mcp token new NAME`")
		return
	}
	if _, ok := s.opts.Tokens.Lookup(fields[1]); !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate", error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, "unknown bearer token: it is not one of the tokens file's (a token replaced by `toolgate mcp token new` stops working)")
		return
	}
	next.ServeHTTP(w, r)
}

// bind keeps each session to the token that opened it and bounds the
// sessions of a token.
func (s *Server) bind(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ti := auth.TokenInfoFromContext(r.Context())
		if ti == nil { // cannot be: RequireBearerToken is in front
			writeError(w, http.StatusUnauthorized, "no bearer token")
			return
		}
		name := ti.UserID
		if sid := r.Header.Get(sessionHeader); sid != "" {
			s.mu.Lock()
			owner, known := s.sessions[sid]
			s.mu.Unlock()
			if known && owner != name {
				writeError(w, http.StatusForbidden, "this session was opened with another token: a session is its token's; open a session of your own")
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r) // the transport refuses it
			return
		}
		if n := s.reserve(name); n > 0 {
			w.Header().Set("Retry-After", "60")
			writeError(w, http.StatusTooManyRequests, fmt.Sprintf("token %s has %d sessions open, at most %d: close one (DELETE %s with its %s) or wait for an idle one to time out",
				name, n, s.opts.MaxSessionsPerToken, Path, sessionHeader))
			return
		}
		rec := &recorder{ResponseWriter: w, s: s, name: name}
		defer rec.done()
		next.ServeHTTP(rec, r)
	})
}

// reserve counts a session being opened by token name, unless it has
// MaxSessionsPerToken open already; it answers how many it has then (0:
// reserved).
func (s *Server) reserve(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	live := map[string]bool{}
	for ss := range s.http.Sessions() {
		live[ss.ID()] = true
	}
	n := s.pending[name]
	for sid, owner := range s.sessions {
		switch {
		case !live[sid]:
			delete(s.sessions, sid)
		case owner == name:
			n++
		}
	}
	if n >= s.opts.MaxSessionsPerToken {
		return n
	}
	s.pending[name]++
	return 0
}

// recorder records the session id the response gives a new session, as its
// headers are written (before the client can send it back).
type recorder struct {
	http.ResponseWriter
	s        *Server
	name     string
	recorded bool
}

func (r *recorder) record() {
	if r.recorded {
		return
	}
	r.recorded = true
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.s.pending[r.name]--
	if r.s.pending[r.name] <= 0 {
		delete(r.s.pending, r.name)
	}
	if sid := r.Header().Get(sessionHeader); sid != "" {
		r.s.sessions[sid] = r.name
	}
}

func (r *recorder) done()                       { r.record() }
func (r *recorder) WriteHeader(code int)        { r.record(); r.ResponseWriter.WriteHeader(code) }
func (r *recorder) Write(b []byte) (int, error) { r.record(); return r.ResponseWriter.Write(b) }
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
func (r *recorder) Flush()                      { r.record(); http.NewResponseController(r.ResponseWriter).Flush() }

// writeError answers a refusal as a JSON-RPC error (no id: it answers no
// request the server read).
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32600, "message": msg}})
}

// LoopbackHosts are the Host values of a server listening at addr
// (HOST:PORT, the port resolved): addr itself and localhost, 127.0.0.1 and
// [::1] with its port.
func LoopbackHosts(addr string) []string { return webguard.LoopbackHosts(addr) }
