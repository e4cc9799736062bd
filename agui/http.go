package agui

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/internal/webguard"
	"github.com/toolgate/toolgate/plan"
)

// Path is where the handler serves AG-UI: POST, and OPTIONS for a CORS
// preflight; every other path is 404.
const Path = "/agui"

// Prefix starts the workflow id of every thread's run.
const Prefix = "agui-"

// WorkflowID is the workflow id of thread's run.
func WorkflowID(thread string) string { return Prefix + thread }

// MaxBodyBytes bounds a request's body.
const MaxBodyBytes = 1 << 20

// bodyTimeout bounds the reading of a request's body.
const bodyTimeout = 30 * time.Second

// DefaultMaxStreams is how many streams a handler keeps open at once unless
// Options.MaxStreams says.
const DefaultMaxStreams = 64

// Options configure the handler.
type Options struct {
	Backend Backend
	// Planner is the planner of every run the endpoint starts (support or
	// openai; scripted for tests). The client never chooses it.
	Planner plan.Config
	// Hosts are the Host header values the endpoint answers to ("host:port",
	// or "host" for any port); required. Any other Host is refused (403), so
	// a DNS-rebinding page cannot reach it.
	Hosts []string
	// Origins are the browser origins (scheme://host[:port]) besides the
	// endpoint's own whose pages may call it: only they get CORS headers. A
	// request with any other Origin is refused (403).
	Origins []string
	// ApprovalTimeout and IdleTimeout of the runs it starts (0: the run's
	// defaults, workflows.DefaultApprovalTimeout and DefaultIdleTimeout).
	ApprovalTimeout, IdleTimeout time.Duration
	// Poll is how often a stream reads the run's state and trace (default 250ms).
	Poll time.Duration
	// MaxStream is the longest a stream stays open (default 10m); the client
	// then posts again (a reconnect) to follow the turn on.
	MaxStream time.Duration
	// MaxStreams bounds the streams open at once (default DefaultMaxStreams);
	// past it a request is refused with 429.
	MaxStreams int
	// Logger gets what goes wrong talking to Temporal (default: nothing).
	Logger *slog.Logger
	// Now is the clock interrupts' expiresAt are checked against (default time.Now).
	Now func() time.Time
	// Callers, if set, authenticates every request by its bearer token
	// (Authorization: Bearer TOKEN) and says who calls; a request without a
	// token it knows is refused (401). Nil: callers are not authenticated.
	Callers func(token string) (Caller, bool)
	// Policy says the worker of the runs has an approval policy. A thread's
	// run is then started signed by its caller (Callers, with a Key), its
	// verified requester, who may decide none of its calls; a start no
	// caller can sign is refused, saying how to fix it. Whatever Policy
	// says, a thread whose run is held to a policy takes new messages from
	// its requester only, and one with no requester is refused altogether.
	Policy bool
}

// Handler serves AG-UI at Path (see the package documentation).
type Handler struct {
	b       Backend
	opts    Options
	origins map[string]bool
	streams chan struct{}
	threads threadLocks
	// reflect bounds the wait for a run to show a start or a message it was
	// sent; errGrace how long a stream tolerates failing reads.
	reflect, errGrace time.Duration
}

// New checks opts and returns the handler.
func New(opts Options) (*Handler, error) {
	if opts.Backend == nil {
		return nil, errors.New("agui: Options.Backend is required (NewBackend over a toolgate client)")
	}
	if len(opts.Hosts) == 0 {
		return nil, errors.New("agui: Options.Hosts is required: the host names (or host:port) clients reach the endpoint by")
	}
	switch opts.Planner.Kind {
	case plan.KindSupport, plan.KindOpenAI, plan.KindScripted:
		if err := opts.Planner.Validate(); err != nil {
			return nil, fmt.Errorf("agui: planner: %w", err)
		}
	default:
		return nil, fmt.Errorf("agui: planner %q: want %q or %q", opts.Planner.Kind, plan.KindSupport, plan.KindOpenAI)
	}
	if opts.ApprovalTimeout < 0 || opts.IdleTimeout < 0 {
		return nil, errors.New("agui: ApprovalTimeout and IdleTimeout may not be negative")
	}
	h := &Handler{b: opts.Backend, origins: map[string]bool{}, reflect: 30 * time.Second, errGrace: 15 * time.Second}
	for _, o := range opts.Origins {
		n, err := webguard.NormalOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("agui: %w", err)
		}
		h.origins[n] = true
	}
	if opts.Poll <= 0 {
		opts.Poll = 250 * time.Millisecond
	}
	if opts.MaxStream <= 0 {
		opts.MaxStream = 10 * time.Minute
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h.opts = opts
	h.streams = make(chan struct{}, opts.MaxStreams)
	h.threads.m = map[string]*threadLock{}
	return h, nil
}

// ServeHTTP checks the request (path, Host, Origin, method, Content-Type,
// size, exact decoding) and answers the stream.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Vary", "Origin")
	if r.URL.Path != Path {
		writeRefusal(w, refuse(http.StatusNotFound, "not found: AG-UI is served at %s", Path))
		return
	}
	if !webguard.HostAllowed(h.opts.Hosts, r.Host) {
		writeRefusal(w, refuse(http.StatusForbidden, "host %q is not one this endpoint answers to: connect to %s (or start it with --host %s)",
			text.Clip(r.Host, 100), h.opts.Hosts[0], text.Clip(webguard.HostOf(r.Host), 100)))
		return
	}
	if o := r.Header.Get("Origin"); o != "" {
		n, err := webguard.NormalOrigin(o)
		switch {
		case err == nil && n == webguard.OwnOrigin(r):
		case err == nil && h.origins[n]:
			hd.Set("Access-Control-Allow-Origin", n)
		default:
			writeRefusal(w, refuse(http.StatusForbidden, "origin %q may not call this endpoint: a page of another site is refused (start it with --agui-origin %s if that page may)",
				text.Clip(o, 100), text.Clip(o, 100)))
			return
		}
	}
	switch r.Method {
	case http.MethodOptions:
		hd.Set("Allow", "POST, OPTIONS")
		if hd.Get("Access-Control-Allow-Origin") != "" {
			hd.Set("Access-Control-Allow-Methods", "POST")
			hd.Set("Access-Control-Allow-Headers", "Content-Type, Accept, Authorization")
			hd.Set("Access-Control-Max-Age", "600")
		}
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodPost:
	default:
		hd.Set("Allow", "POST, OPTIONS")
		writeRefusal(w, refuse(http.StatusMethodNotAllowed, "method %s: AG-UI takes POST (a RunAgentInput)", text.Clip(r.Method, 20)))
		return
	}
	caller, bad := h.authenticate(r)
	if bad != nil {
		hd.Set("WWW-Authenticate", `Bearer realm="toolgate agui"`)
		writeRefusal(w, bad)
		return
	}
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		writeRefusal(w, err)
		return
	}
	if !acceptsEventStream(r.Header.Values("Accept")) {
		writeRefusal(w, refuse(http.StatusNotAcceptable, "Accept %q: this endpoint answers text/event-stream", text.Clip(strings.Join(r.Header.Values("Accept"), ", "), 100)))
		return
	}
	if r.ContentLength > MaxBodyBytes {
		writeRefusal(w, refuse(http.StatusRequestEntityTooLarge, "the body is %d bytes, at most %d", r.ContentLength, MaxBodyBytes))
		return
	}
	// A body sent slowly holds the request only so long; the deadline is
	// lifted before the stream (a read deadline left on the connection would
	// cut it).
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeRefusal(w, refuse(http.StatusRequestEntityTooLarge, "the body is more than %d bytes", MaxBodyBytes))
			return
		}
		writeRefusal(w, refuse(http.StatusBadRequest, "reading the body: %s", text.Clip(err.Error(), 200)))
		return
	}
	req, bad := parseRequest(body)
	if bad != nil {
		writeRefusal(w, bad)
		return
	}
	select {
	case h.streams <- struct{}{}:
		defer func() { <-h.streams }()
	default:
		w.Header().Set("Retry-After", "5")
		writeRefusal(w, refuse(http.StatusTooManyRequests, "%d streams are open, at most %d: post again later", h.opts.MaxStreams, h.opts.MaxStreams))
		return
	}
	h.serve(w, r, req, caller)
}

// writeRefusal answers a refused request: its status, and why as text.
func writeRefusal(w http.ResponseWriter, e *badRequest) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(e.status)
	_, _ = io.WriteString(w, "agui: "+e.msg+"\n")
}

// checkContentType takes application/json, in UTF-8 if a charset is named.
func checkContentType(ct string) *badRequest {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return refuse(http.StatusUnsupportedMediaType, "Content-Type %q: send the RunAgentInput as application/json", text.Clip(ct, 100))
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return refuse(http.StatusUnsupportedMediaType, "charset %q: send UTF-8", text.Clip(cs, 40))
	}
	return nil
}

// acceptsEventStream says whether Accept headers (none: anything) take
// text/event-stream.
func acceptsEventStream(values []string) bool {
	if len(values) == 0 {
		return true
	}
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || params["q"] == "0" {
				continue
			}
			if mt == "text/event-stream" || mt == "text/*" || mt == "*/*" {
				return true
			}
		}
	}
	return false
}

// threadLocks serializes what changes a thread's run (a start, a message, a
// resume) within this process: two posts of one thread cannot both count
// the same user message as new.
type threadLocks struct {
	mu sync.Mutex
	m  map[string]*threadLock
}

type threadLock struct {
	ch    chan struct{}
	users int
}

// lock takes thread's lock, or gives up when done is closed; unlock it.
func (l *threadLocks) lock(thread string, done <-chan struct{}) (unlock func(), ok bool) {
	l.mu.Lock()
	t := l.m[thread]
	if t == nil {
		t = &threadLock{ch: make(chan struct{}, 1)}
		l.m[thread] = t
	}
	t.users++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if t.users--; t.users == 0 {
			delete(l.m, thread)
		}
		l.mu.Unlock()
	}
	select {
	case t.ch <- struct{}{}:
		return func() { <-t.ch; release() }, true
	case <-done:
		release()
		return nil, false
	}
}

// Guard serves next (a page served beside the endpoint, such as the
// example chat page) behind the endpoint's Host check, so a DNS-rebinding
// page cannot read it either.
func (h *Handler) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !webguard.HostAllowed(h.opts.Hosts, r.Host) {
			w.Header().Set("X-Content-Type-Options", "nosniff")
			writeRefusal(w, refuse(http.StatusForbidden, "host %q is not one this server answers to: connect to %s", text.Clip(r.Host, 100), h.opts.Hosts[0]))
			return
		}
		next.ServeHTTP(w, r)
	})
}
