package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/codecserver"
	"github.com/toolgate/toolgate/encryption"
	"github.com/toolgate/toolgate/internal/private"
)

// defaultCodecOrigins are the browser origins a codec server without
// --origin lets in: the Temporal UI at its usual local address (as
// `toolgate dev --ui-address 127.0.0.1:8233` or `temporal server start-dev` serve it).
var defaultCodecOrigins = []string{"http://127.0.0.1:8233", "http://localhost:8233"}

// codecServer is `toolgate codec-server`: Temporal's codec-server protocol
// over the payload encryption key file, for the Web UI and
// `temporal workflow show --codec-endpoint`.
func (c *cli) codecServer(ctx context.Context, args []string) error {
	fs := c.flags("codec-server")
	listen := fs.String("listen", "127.0.0.1:8081", "serve at this host:port (non-loopback needs --auth-file and --tls-cert/--tls-key, or --insecure)")
	keyFile := fs.String("encryption-key-file", "", "the payload encryption key file (`toolgate keys encryption FILE`; mode 0600); required")
	var origins, namespaces listFlag
	fs.Var(&origins, "origin", "a browser origin allowed to call the server, exactly scheme://host[:port], such as the Temporal UI's http://127.0.0.1:8233 (repeat, or comma-separated, for several; default "+strings.Join(defaultCodecOrigins, " and ")+")")
	authFile := fs.String("auth-file", "", "a file (mode 0600) holding the exact Authorization header value every request must carry, such as `Bearer TOKEN` (empty: none asked for)")
	fs.Var(&namespaces, "namespace", "serve only requests for this namespace (X-Namespace; repeat, or comma-separated, for several; default: any)")
	tlsCert := fs.String("tls-cert", "", "serve over HTTPS with this certificate file (PEM)")
	tlsKey := fs.String("tls-key", "", "the private key file (PEM) of --tls-cert")
	insecure := fs.Bool("insecure", false, "serve a non-loopback address without --auth-file or TLS (anyone who can reach it can then decrypt payloads)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("codec-server takes no arguments, got %q (see toolgate --help)", pos)
	}
	if *keyFile == "" {
		return errors.New("codec-server needs --encryption-key-file FILE (make one with `toolgate keys encryption FILE`)")
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("--listen %q: want HOST:PORT: %w", *listen, err)
	}
	useTLS := *tlsCert != "" || *tlsKey != ""
	if useTLS && (*tlsCert == "" || *tlsKey == "") {
		return errors.New("the codec server's TLS needs both a certificate and its key (--tls-cert and --tls-key)")
	}
	if !isLoopback(host) && (!useTLS || *authFile == "") {
		var missing []string
		if *authFile == "" {
			missing = append(missing, "an Authorization check (--auth-file)")
		}
		if !useTLS {
			missing = append(missing, "TLS (--tls-cert, --tls-key)")
		}
		if !*insecure {
			return fmt.Errorf("codec server address %s is not a loopback address: it needs %s, or --insecure to serve it without", *listen, strings.Join(missing, " and "))
		}
		fmt.Fprintf(c.stderr, "WARNING: the codec server at %s is on a non-loopback address without %s: whoever can reach it can decrypt payloads\n", *listen, strings.Join(missing, " and "))
	}
	allowed, err := codecOrigins(origins)
	if err != nil {
		return err
	}
	var auth string
	if *authFile != "" {
		if auth, err = readAuthFile(*authFile); err != nil {
			return err
		}
	}
	k, err := encryption.LoadKeyring(*keyFile)
	if err != nil {
		return err
	}
	h, err := codecserver.New(codecserver.Options{Codec: k.Codec(), Origins: allowed, Authorization: auth, Namespaces: namespaces})
	if err != nil {
		return err
	}
	var tc *tls.Config
	if useTLS {
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			return fmt.Errorf("codec server TLS (--tls-cert %s, --tls-key %s): %w", *tlsCert, *tlsKey, err)
		}
		tc = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	srv, err := codecserver.Listen(ctx, *listen, h, tc)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "codec server at %s\n", srv.URL)
	return srv.Wait()
}

// codecOrigins checks --origin values (none: defaultCodecOrigins) and gives
// them in the form browsers send: lower case, no trailing slash.
func codecOrigins(given []string) ([]string, error) {
	if len(given) == 0 {
		return defaultCodecOrigins, nil
	}
	var out []string
	for _, o := range given {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
			return nil, fmt.Errorf("--origin %.100q: want http(s)://HOST[:PORT], the address the browser shows, without a path", o)
		}
		out = append(out, strings.ToLower(u.Scheme+"://"+u.Host))
	}
	return out, nil
}

// readAuthFile reads --auth-file: one line, the Authorization header value,
// from a regular file only its owner may read (on Unix).
func readAuthFile(path string) (string, error) {
	data, err := private.ReadFile(path, 8<<10)
	if err != nil {
		return "", fmt.Errorf("--auth-file: %w", err)
	}
	v := strings.TrimRight(string(data), "\r\n")
	if strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("--auth-file %s: empty; want the Authorization header value, such as `Bearer TOKEN`", path)
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("--auth-file %s: want one line, the Authorization header value (a control character or second line found)", path)
		}
	}
	return v, nil
}
