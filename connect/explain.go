package connect

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// hint is what to change for a failed connection whose error says one of
// these things.
type hint struct {
	says []string
	tls  int // 1: only when TLS was on, -1: only when it was off, 0: either
	what string
}

// hints are tried in order; the first whose words appear in the error wins.
var hints = []hint{
	{says: []string{"certificate required"}, tls: 1,
		what: "the server requires a client certificate: give --tls-cert and --tls-key (or TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH)"},
	{says: []string{"bad certificate", "unknown certificate authority", "certificate unknown", "expired certificate", "unsupported certificate"}, tls: 1,
		what: "the server refused the client certificate: use one signed by a CA the server trusts (--tls-cert, --tls-key)"},
	{says: []string{"x509: certificate signed by unknown authority", "failed to verify certificate"}, tls: 1,
		what: "the server's certificate is not signed by a CA this client trusts: give its CA with --tls-ca (TEMPORAL_TLS_SERVER_CA_CERT_PATH)"},
	{says: []string{"x509: certificate is valid for", "certificate is not valid for"}, tls: 1,
		what: "the server's certificate is for another name: connect by a name it holds, or set --tls-server-name"},
	{says: []string{"first record does not look like a TLS handshake", "tls: oversized record"}, tls: 1,
		what: "the server does not speak TLS at this address: drop the TLS settings (or --tls=false)"},
	// With TLS 1.3 the server checks a client certificate after the client
	// has finished its handshake: a refusal may arrive as a closed
	// connection instead of the server's alert.
	{says: []string{"broken pipe", "connection reset by peer", "EOF"}, tls: 1,
		what: "the server closed the connection after the TLS handshake: it may require a client certificate or refuse this one: give --tls-cert and --tls-key, signed by a CA the server trusts"},
	{says: []string{"server preface", "connection reset by peer", "EOF"}, tls: -1,
		what: "the server may require TLS: give --tls (with --tls-ca if its CA is not the system's, and --tls-cert/--tls-key if it requires a client certificate)"},
	{says: []string{"connection refused", "no such host"}, tls: 0,
		what: "nothing answers there: start a server (`toolgate dev`) or point --address / TEMPORAL_ADDRESS at yours"},
}

// Explain wraps a failed dial's err with where it tried and, for the usual
// mistakes, what to change.
func Explain(c *Conn, err error) error {
	where := "Temporal at " + c.Describe()
	var denied *serviceerror.PermissionDenied
	if code := status.Code(err); code == codes.Unauthenticated || code == codes.PermissionDenied || errors.As(err, &denied) {
		what := "the server refused these credentials: check the API key (--api-key, TEMPORAL_API_KEY) or the client certificate"
		switch {
		case c.tokenFile != "":
			what = "the server refused the token of " + c.tokenFile + ": a `toolgate dev` server takes the worker token it writes to DATA/auth/worker.token of its own data directory"
		case c.apiKeyFrom == "" && c.tlsCert == "":
			what = "the server wants credentials: give an API key (--api-key, TEMPORAL_API_KEY), a token file (--token-file, TOOLGATE_TOKEN_FILE) or a client certificate (--tls-cert, --tls-key)"
		}
		return fmt.Errorf("%s refused the connection: %s: %w", where, what, err)
	}
	msg := err.Error()
	for _, h := range hints {
		if (h.tls == 1 && !c.tls) || (h.tls == -1 && c.tls) {
			continue
		}
		for _, s := range h.says {
			if strings.Contains(msg, s) {
				return fmt.Errorf("cannot connect to %s: %s: %w", where, h.what, err)
			}
		}
	}
	return fmt.Errorf("cannot connect to %s: is a server running there? (`toolgate dev` starts one; --address / TEMPORAL_ADDRESS point elsewhere): %w", where, err)
}
