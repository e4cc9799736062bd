package devserver

import (
	"log/slog"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/metrics"
	"google.golang.org/grpc"

	authorityns "github.com/toolgate/toolgate/authority"
)

// Options configures Start.
type Options struct {
	// DataDir is required: the SQLite file is DataDir/temporal.db (created
	// with the schema if missing, used as it is otherwise), and
	// DataDir/temporal.lock keeps a second server off it while this one runs.
	// A missing DataDir is created 0700; the files Start creates in it are
	// 0600 (and those it finds are made so).
	// Not needed with Database.
	DataDir string
	// Database, when set, is a PostgreSQL URL
	// (postgres://USER[:PASSWORD]@HOST:PORT/DB?sslmode=disable; the password
	// may come from PGPASSWORD): history goes to DB, visibility to
	// DB_visibility, both created if missing and migrated with the server's
	// schema tooling to the versions of its embedded schema files. A second
	// embedded server on the same DB is refused (advisory lock).
	Database  string
	Address   string // frontend gRPC host:port; "" means 127.0.0.1 and a free port
	Namespace string // "" means "default"; registered if missing (retention 7 days)
	// AuthorityNamespace is registered beside Namespace (retention 7 days):
	// where only workers write (package authority). "": Namespace +
	// authority.Suffix. With Authorization, a person may only read it.
	AuthorityNamespace string
	UIAddress          string // host:port for the Temporal Web UI; "" means no UI
	// HTTPAPI serves the frontend's HTTP/JSON API on a free port of the
	// frontend's IP (see HTTPAddress). Off by default: the API has no
	// authentication and takes cross-origin text/plain POSTs, so a web page in
	// the operator's browser could start and signal workflows through it.
	HTTPAPI bool
	// Nexus makes the server able to serve Nexus operations: the server's
	// history service sends each one to the frontend's HTTP port, so that
	// port is served (on a free port of the frontend's IP), but for Nexus
	// requests only: without HTTPAPI every call of the HTTP/JSON API on it
	// is refused (NexusOnly), so a web page cannot start or signal a
	// workflow through it. A Nexus request must be of Content-Type
	// application/json or a Temporal payload, which no page sends to another
	// origin without a CORS preflight, which the server never allows.
	// Not with TLS: ErrNexusUnderTLS.
	Nexus bool
	// Logger receives the server's warnings and errors (and everything, when
	// its handler is enabled for debug). nil discards the server's logs.
	Logger *slog.Logger
	// SearchAttributes to register (name -> type) in the namespace, e.g.
	// {"ToolgateStatus": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	// "ToolgatePendingTools": enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST}.
	// Those already registered with the same type are left alone; one
	// registered with another type is an error.
	SearchAttributes map[string]enumspb.IndexedValueType
	// DynamicConfig overrides settings of the server's dynamic config, keyed
	// as in a Temporal dynamic config file (for example
	// "history.transferProcessorMaxPollRPS": 20), with values of the
	// setting's type (int, bool, string, float64, time.Duration). nil keeps
	// toolgate's settings (see QueuePollRPS).
	DynamicConfig map[string]any
	// FrontendInterceptors are called for every call of the public frontend
	// (Address), after the server's own interceptors: a test can check what
	// clients send there, such as an API key's authorization header. With
	// TLS or Authorization the server's own parts use the internal frontend,
	// whose calls skip them; without those parts call the public frontend
	// too, and pass through them.
	FrontendInterceptors []grpc.UnaryServerInterceptor
	// Metrics receives the server's own metrics (persistence requests and
	// their latency, task queue latencies …); nil records none.
	Metrics metrics.Handler
	// TLS, when set, makes the frontend at Address serve TLS only, and with
	// TLS.ClientCAFile require client certificates (mutual TLS). The
	// server's own parts then use a plaintext frontend on 127.0.0.1
	// (Server.InternalAddress): see TLSOptions for what that means.
	TLS *TLSOptions
	// Authorization, when set, gives every call of the frontend at Address a
	// role by its credential (a bearer token this server signs with a key
	// in AuthOptions.KeyDir, a client certificate, or none: a person's
	// role), confines a person's role to what a person does with a run
	// (start, signal, update, query, read, cancel, terminate, reset,
	// delete: never poll, answer tasks or act on activities), turns on
	// principal attribution (history events carry the caller's role and
	// name), and writes a worker token to KeyDir/WorkerTokenFile. The
	// server's own parts then use an internal frontend on 127.0.0.1
	// (InternalAddress), and the Web UI the public frontend with a person's
	// role. nil: no authorization, every client may call every API.
	Authorization *AuthOptions
	// UICodecEndpoint, when set, is the URL of a codec server (e.g.
	// http://127.0.0.1:8081, or one that `toolgate codec-server` serves) the
	// Web UI sends payloads to for decoding, from the browser: the UI's
	// codec.endpoint setting, served at UIAddress's /api/v1/settings.
	// Ignored without UIAddress (so a caller may set it whenever payloads are
	// encrypted).
	UICodecEndpoint string
}

// authorityNamespace is the authority namespace to serve.
func (o Options) authorityNamespace() string {
	if o.AuthorityNamespace == "" {
		return authorityns.Namespace(o.namespace())
	}
	return o.AuthorityNamespace
}

// namespace is the namespace to serve (DefaultNamespace if unset).
func (o Options) namespace() string {
	if o.Namespace == "" {
		return DefaultNamespace
	}
	return o.Namespace
}
