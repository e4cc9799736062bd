// Package inbox is toolgate's web approvals inbox: one dependency-free page
// (HTML, its script and the token signer it shares with package confirm,
// internal/webkeys's sign.js, one stylesheet, embedded in the binary) and a small JSON
// API over a toolgate client. It lists every call waiting for a decision
// across runs, with its exact arguments and args_digest, and sends each
// decision as an update bound to the digest the page showed. For any run it
// shows the steps (GET /api/steps) and lets an operator rewind the run to
// just before a call, bound to the digest of the preview the page showed, or
// fork it there (POST /api/rewind, POST /api/fork).
//
// The page is safe as a web app: a Content-Security-Policy forbids inline
// script, every string from a run is inserted as text (control and bidi
// characters marked, JSON shown from its exact text), the API answers only
// same-origin requests carrying X-Toolgate-Inbox, and the endpoints that act
// (decide, rewind, fork) take only JSON POSTs, decoded as strictly as the run
// decodes them; a GET never acts. Under a worker policy the page signs
// decisions, rewinds and forks in the browser (WebCrypto Ed25519) with a key
// the operator loads into it: the server never sees a private key.
package inbox

import (
	"context"
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/internal/webguard"
	"github.com/toolgate/toolgate/internal/webkeys"
	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/timeline"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of every response: no inline script,
// nothing from elsewhere, no framing.
const CSP = "default-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

// Header is the custom header a decision must carry (a cross-origin form
// cannot set one, and a cross-origin fetch that sets one needs a CORS
// preflight the inbox never answers).
const Header = "X-Toolgate-Inbox"

// MaxBodyBytes bounds a decision's request body.
const MaxBodyBytes = 256 << 10

// Backend is what the inbox needs of a toolgate client; *client.Client is one.
// Its per-run query deadline while listing is the client's
// (client.WithQueryTimeout).
type Backend interface {
	Pending(ctx context.Context, opts client.PendingOptions) (client.PendingPage, error)
	State(ctx context.Context, id string) (workflows.State, error)
	Decide(ctx context.Context, id string, approve bool, in workflows.DecisionInput, opts ...client.DecideOption) (workflows.DecisionResult, error)
	Respond(ctx context.Context, id string, in workflows.DecisionInput, opts ...client.DecideOption) (workflows.DecisionResult, error)
	Tool(ctx context.Context, id, name string) (tool.Spec, error)
	Steps(ctx context.Context, id string) (*timeline.Timeline, error)
	RewindPreview(ctx context.Context, id, call string) (timeline.Preview, error)
	Rewind(ctx context.Context, id, call, expect string, by client.Operator) (client.Rewound, error)
	Fork(ctx context.Context, src, at, newID string, args json.RawMessage, by client.Operator) (sdkclient.WorkflowRun, error)
	AwaitFork(ctx context.Context, id, runID string) error
	// Guards reads the fleet ledger of a task queue (ok false: it never
	// started): the page names the tools paused on it.
	Guards(ctx context.Context, taskQueue string) (ledger.View, bool, error)
}

var _ Backend = (*client.Client)(nil)

// Options configure the inbox.
type Options struct {
	// Hosts are host names (besides IP literals and localhost) the inbox
	// answers to; any other Host header is refused, so a DNS-rebinding page
	// cannot read it.
	Hosts []string
	// Timeout bounds the Temporal calls of one request (default 15s).
	Timeout time.Duration
	// TraceRecords is how many of a run's most recent trace records a call
	// shows (default 8).
	TraceRecords int
	// TaskQueues are the task queues whose runs the inbox lists: those this
	// deployment's workers poll (none: the client's, client.WithTaskQueue).
	// A run started on another queue is never listed nor queried. The
	// fleet ledger of each is read for its pauses (none given:
	// workflows.TaskQueue's).
	TaskQueues []string
	// PageSize is how many runs a page lists unless the request says
	// (default DefaultPageSize); only they are queried.
	PageSize int
}

// DefaultPageSize is the number of runs a page of the inbox lists by default.
const DefaultPageSize = 20

// Handler serves the inbox.
type Handler struct {
	b    Backend
	opts Options
	mux  *http.ServeMux
}

// New returns the inbox over b (a *client.Client).
func New(b Backend, opts Options) *Handler {
	if opts.Timeout <= 0 {
		opts.Timeout = 15 * time.Second
	}
	if opts.TraceRecords <= 0 {
		opts.TraceRecords = 8
	}
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	h := &Handler{b: b, opts: opts, mux: http.NewServeMux()}
	files, _ := fs.Sub(static, "static") // cannot fail: the directory is embedded
	h.mux.Handle("GET /{$}", serveFile(files, "index.html", "text/html; charset=utf-8"))
	h.mux.Handle("GET "+webkeys.Path, webkeys.Handler())
	h.mux.Handle("GET /app.js", serveFile(files, "app.js", "text/javascript; charset=utf-8"))
	h.mux.Handle("GET /app.css", serveFile(files, "app.css", "text/css; charset=utf-8"))
	h.mux.HandleFunc("GET /api/pending", h.pending)
	h.mux.HandleFunc("POST /api/decide", h.decide)
	h.mux.HandleFunc("GET /api/steps", h.steps)
	h.mux.HandleFunc("GET /api/rewind-preview", h.rewindPreview)
	h.mux.HandleFunc("POST /api/rewind", h.rewind)
	h.mux.HandleFunc("POST /api/fork", h.fork)
	return h
}

// ServeHTTP sets the security headers, refuses unknown hosts, and routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	webguard.PageHeaders(w.Header(), CSP)
	if !webguard.IPOrNamed(h.opts.Hosts, r.Host) {
		writeError(w, http.StatusMisdirectedRequest, "unknown host %q: start the inbox with this host allowed", r.Host)
		return
	}
	h.mux.ServeHTTP(w, r)
}

func serveFile(files fs.FS, name, contentType string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := fs.ReadFile(files, name)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "reading %s: %v", name, err)
			return
		}
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(b)
	})
}
