// Package confirm takes the decisions that come back from notifications: a
// link's confirm page (GET /confirm?t=TOKEN shows the call, POST /confirm
// decides it) and Slack's interactivity endpoint (POST /slack/interactions,
// the Approve / Reject buttons of a Slack message).
//
// A link token (notify.SignLink) binds one call of one run, the exact
// arguments it was sent with, its recipient, its channel and an expiry; it
// decides nothing itself. A GET never decides (mail scanners fetch every
// link): only the page's own form, posted from the page's origin, does, and
// only while the run shows the call waiting with the link's args_digest.
// Who the decision is by depends on the run: with no policy the link is the
// authority (its recipient decides through its channel); under a policy, an
// approver whose via names the channel has the decision signed here with the
// listener's via key (Options.ViaKey), and anyone else signs it in the page with their own key, which
// never leaves the browser. A Slack click counts only when Slack's signature
// over the request verifies against a configured signing secret.
package confirm

import (
	"context"
	"crypto/ed25519"
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/internal/webguard"
	"github.com/toolgate/toolgate/internal/webkeys"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of every response: scripts, styles and
// images from this origin only (no inline script), forms posting only here,
// no framing, no base URL.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// MaxBodyBytes bounds the body of a POST (a form, a Slack interaction).
const MaxBodyBytes = 64 << 10

// DefaultTimeout bounds the Temporal calls of one request.
const DefaultTimeout = 15 * time.Second

// SlackDecideTimeout bounds a Slack click's decision: Slack wants its answer
// within 3 seconds.
const SlackDecideTimeout = 2500 * time.Millisecond

// LinkDecisionLifetime is how long a decision the handler signs with the
// via key is valid (less if the policy's max_token_lifetime is shorter).
const LinkDecisionLifetime = 5 * time.Minute

// Backend is what the handler needs of a toolgate client.
type Backend interface {
	State(ctx context.Context, id string) (workflows.State, error)
	Decide(ctx context.Context, id string, approve bool, in workflows.DecisionInput, opts ...client.DecideOption) (workflows.DecisionResult, error)
}

var _ Backend = (*client.Client)(nil)

// Options configure the handler.
type Options struct {
	// Notify is the notify file: the link key, the Slack signing secrets and
	// where a click's response_url may point.
	Notify *notify.Config
	// Policy is the deployment's policy (nil: none): who is an approver,
	// their via and their Slack ids.
	Policy *policy.Policy
	// ViaKey signs the decisions made by link for approvers whose via allows
	// it (the listener's --via-key; its public key is the policy's
	// via_key). It is the listener's alone: workers, which sign links with
	// notify's link key, never hold it. Nil: every decision under a policy
	// is signed by its approver.
	ViaKey ed25519.PrivateKey
	// Hosts are host names (besides IP literals and localhost) answered; any
	// other Host header is refused (as inbox.Options.Hosts).
	Hosts []string
	// Timeout bounds the Temporal calls of one request (DefaultTimeout).
	Timeout time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
	// HTTPClient posts to Slack's response_url (default: a 5s timeout, no
	// redirects followed).
	HTTPClient *http.Client
	// Logger logs what could not be posted to Slack (slog.Default()); it
	// never logs a URL's path or a token.
	Logger *slog.Logger
}

// Handler serves the confirm page, its decisions and Slack's clicks.
type Handler struct {
	b     Backend
	opts  Options
	mux   *http.ServeMux
	posts sync.WaitGroup
}

// New returns the handler over b (a *client.Client).
func New(b Backend, opts Options) *Handler {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 5 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	h := &Handler{b: b, opts: opts, mux: http.NewServeMux()}
	files, _ := fs.Sub(static, "static") // cannot fail: the directory is embedded
	h.mux.HandleFunc("GET /confirm", h.page)
	h.mux.HandleFunc("POST /confirm", h.decide)
	h.mux.HandleFunc("POST /slack/interactions", h.slack)
	h.mux.Handle("GET "+webkeys.Path, webkeys.Handler())
	h.mux.Handle("GET /confirm.js", serveFile(files, "confirm.js", "text/javascript; charset=utf-8"))
	h.mux.Handle("GET /confirm.css", serveFile(files, "confirm.css", "text/css; charset=utf-8"))
	return h
}

// Paths are the paths the handler serves: mount it on the inbox's listener
// for each (the inbox serves the same /sign.js).
func Paths() []string {
	return []string{"/confirm", "/slack/interactions", webkeys.Path, "/confirm.js", "/confirm.css"}
}

// ServeHTTP sets the security headers, refuses unknown hosts, and routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	webguard.PageHeaders(w.Header(), CSP)
	if !webguard.IPOrNamed(h.opts.Hosts, r.Host) {
		http.Error(w, "unknown host "+quote(r.Host)+": start the listener with this host allowed", http.StatusMisdirectedRequest)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// Wait waits for the replies to Slack still being posted (at shutdown, and
// in tests).
func (h *Handler) Wait() { h.posts.Wait() }

// linkKey is the key that signs links (notify's link_key_file); nil if none
// is configured.
func (h *Handler) linkKey() ed25519.PrivateKey {
	if h.opts.Notify == nil {
		return nil
	}
	return h.opts.Notify.LinkKey()
}

// mayClick says why name may not decide by a click that came through
// channel, with the decision signed by the via key, or returns nil when
// they may: the deployment's policy lets them (via) and its via_key is this
// handler's, so the run takes what it signs.
func (h *Handler) mayClick(name, channel string) error {
	p := h.opts.Policy
	if p == nil {
		return errors.New("this listener was started without the deployment's policy, so no decision by link counts here: sign the decision with your key")
	}
	if err := p.DecidesVia(name, channel); err != nil {
		return err
	}
	pub, ok := p.ViaPublicKey()
	key := h.opts.ViaKey
	if !ok || key == nil || !pub.Equal(key.Public()) {
		return errors.New("the policy's via_key is not this listener's --via-key, so the run would refuse a decision signed with it: sign the decision with your key")
	}
	return nil
}

// lifetime is how long a decision signed with the via key is valid.
func (h *Handler) lifetime() time.Duration {
	d := LinkDecisionLifetime
	if h.opts.Policy != nil {
		d = min(d, h.opts.Policy.TokenLifetime())
	}
	return d
}

func serveFile(files fs.FS, name, contentType string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b, err := fs.ReadFile(files, name)
		if err != nil {
			http.Error(w, "reading "+name+": "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(b)
	})
}
