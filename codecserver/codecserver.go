// Package codecserver serves a payload codec over Temporal's codec-server
// HTTP protocol (POST /encode, POST /decode, {"payloads":[…]}), so the
// Temporal Web UI and `temporal workflow show --codec-endpoint` show
// decoded payloads, to those the server lets in: browsers of the allowed
// origins only (CORS), callers with the Authorization header it is given,
// for the namespaces it serves.
package codecserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"
)

// DefaultMaxBody is the default bound of a request's body: 8 MiB.
const DefaultMaxBody = 8 << 20

// Options configure a codec server's handler.
type Options struct {
	// Codec encodes and decodes the payloads. Required.
	Codec converter.PayloadCodec
	// Origins are the exact browser origins (scheme://host[:port], such as
	// http://127.0.0.1:8233, the Web UI's) that CORS lets call the server.
	// A request from any other origin gets no CORS headers and is refused
	// (403); a request without an Origin (a CLI, not a browser) is served.
	Origins []string
	// Authorization, if not empty, is the exact Authorization header value
	// every POST must carry (compared in constant time).
	Authorization string
	// Namespaces, if not empty, are the only X-Namespace values served.
	Namespaces []string
	// MaxBody bounds a request's body in bytes (0: DefaultMaxBody).
	MaxBody int64
}

// handler is New's handler.
type handler struct {
	codec      http.Handler
	origins    map[string]bool
	auth       [sha256.Size]byte // of Options.Authorization, when set
	hasAuth    bool
	namespaces []string
	maxBody    int64
}

// New returns the codec server's handler: POST /encode and POST /decode
// through opts.Codec, with CORS for opts.Origins (preflight OPTIONS
// answered), and the Authorization, namespace and body-size checks of
// opts. Every refusal says why in its body (text/plain).
func New(opts Options) (http.Handler, error) {
	if opts.Codec == nil {
		return nil, errors.New("codec server: no codec")
	}
	if opts.MaxBody < 0 {
		return nil, fmt.Errorf("codec server: MaxBody %d: want 0 (the default, %d) or more", opts.MaxBody, DefaultMaxBody)
	}
	h := &handler{
		codec:      converter.NewPayloadCodecHTTPHandler(opts.Codec),
		origins:    map[string]bool{},
		namespaces: slices.Clone(opts.Namespaces),
		maxBody:    opts.MaxBody,
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBody
	}
	for _, o := range opts.Origins {
		if o == "" || o == "*" || o == "null" || strings.HasSuffix(o, "/") || !strings.Contains(o, "://") {
			return nil, fmt.Errorf("codec server: origin %q: want an exact scheme://host[:port], no path (such as http://127.0.0.1:8233)", o)
		}
		h.origins[o] = true
	}
	if opts.Authorization != "" {
		h.auth, h.hasAuth = sha256.Sum256([]byte(opts.Authorization)), true
	}
	return h, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	if origin != "" && h.origins[origin] {
		hd := w.Header()
		hd.Set("Access-Control-Allow-Origin", origin)
		hd.Set("Access-Control-Allow-Credentials", "true")
		hd.Set("Access-Control-Allow-Methods", "POST")
		hd.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
		hd.Set("Access-Control-Max-Age", "600")
	}
	if r.URL.Path != "/encode" && r.URL.Path != "/decode" {
		refuse(w, http.StatusNotFound, "no such endpoint %.200q: this codec server answers POST /encode and POST /decode", r.URL.Path)
		return
	}
	switch r.Method {
	case http.MethodOptions:
		if origin == "" || !h.origins[origin] {
			refuse(w, http.StatusForbidden, "origin %.200q may not call this codec server (not one of its --origin)", origin)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "POST, OPTIONS")
		refuse(w, http.StatusMethodNotAllowed, "method %s: %s takes POST", r.Method, r.URL.Path)
		return
	}
	if origin != "" && !h.origins[origin] {
		// A browser page of another origin: refused, not merely kept from reading the answer.
		refuse(w, http.StatusForbidden, "origin %.200q may not call this codec server (not one of its --origin)", origin)
		return
	}
	if h.hasAuth {
		got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got[:], h.auth[:]) != 1 {
			if r.Header.Get("Authorization") == "" {
				refuse(w, http.StatusUnauthorized, "no Authorization header: this codec server needs its token")
			} else {
				refuse(w, http.StatusUnauthorized, "wrong Authorization header")
			}
			return
		}
	}
	if len(h.namespaces) > 0 {
		if ns := r.Header.Get("X-Namespace"); !slices.Contains(h.namespaces, ns) {
			refuse(w, http.StatusForbidden, "namespace %.100q (X-Namespace) is not served by this codec server", ns)
			return
		}
	}
	if r.ContentLength > h.maxBody {
		refuse(w, http.StatusRequestEntityTooLarge, "request body of %d bytes is over this codec server's bound of %d", r.ContentLength, h.maxBody)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			refuse(w, http.StatusRequestEntityTooLarge, "request body is over this codec server's bound of %d bytes", h.maxBody)
			return
		}
		refuse(w, http.StatusBadRequest, "reading the request body: %v", err)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	h.codec.ServeHTTP(w, r)
}

// refuse answers code with the reason as text.
func refuse(w http.ResponseWriter, code int, format string, args ...any) {
	http.Error(w, "codec server: "+fmt.Sprintf(format, args...), code)
}

// Server is a served codec server (or any handler) on a listener.
type Server struct {
	// URL is where it is served: http(s)://HOST:PORT, the port the one bound.
	URL  string
	srv  *http.Server
	done chan error
}

// Listen serves h at addr (HOST:PORT; port 0: a free one), over TLS with
// tlsConfig if it is not nil, until ctx is done. It returns once listening.
func Listen(ctx context.Context, addr string, h http.Handler, tlsConfig *tls.Config) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("codec server: %w", err)
	}
	scheme := "http"
	if tlsConfig != nil {
		ln, scheme = tls.NewListener(ln, tlsConfig), "https"
	}
	s := &Server{
		URL:  scheme + "://" + ln.Addr().String(),
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: time.Minute},
		done: make(chan error, 1),
	}
	go func() {
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	go func() {
		<-ctx.Done()
		s.Close()
	}()
	return s, nil
}

// Close stops the server, letting requests under way finish for up to 5s.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

// Wait waits until the server stops, and returns why if not Listen's ctx
// nor Close.
func (s *Server) Wait() error {
	err := <-s.done
	s.done <- err // for another Wait
	return err
}
