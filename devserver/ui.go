package devserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
)

// UIServerModule is the module that serves the Temporal Web UI in-process,
// and UIServerVersion its version in go.mod (v2.55.0 is the newest that needs
// no newer Go than 1.26.8 nor a newer go.temporal.io/api than v1.63.5).
const (
	UIServerModule  = "github.com/temporalio/ui-server/v2"
	UIServerVersion = "v2.55.0"
)

type ui struct {
	srv     *uiserver.Server
	address string
	done    chan error
}

// startUI serves the Temporal UI on addr, talking to the frontend at
// frontend (plaintext, or with tlsFiles TLS: the server's certificate
// pinned, and a client certificate when there is one), with codec as its
// codec server's endpoint ("" for none), and returns once it answers
// /healthz.
func startUI(ctx context.Context, addr, frontend, namespace, codec string, tlsFiles *localClientTLS) (_ *ui, err error) {
	host, port, err := parseListenAddress(addr)
	if err != nil {
		return nil, fmt.Errorf("devserver: UIAddress %q: %w", addr, err)
	}
	if port == 0 {
		if port, err = freePort(host); err != nil {
			return nil, fmt.Errorf("devserver: %w", err)
		}
	}
	// The UI server exits the process (echo's Logger.Fatal) when it cannot
	// bind, so check first that it can.
	if err := checkPortFree(host, port); err != nil {
		return nil, fmt.Errorf("devserver: UI address %s is not free: %w", addr, err)
	}
	var uiTLS uiconfig.TLS
	if tlsFiles != nil {
		if uiTLS, err = uiTLSConfig(tlsFiles); err != nil {
			return nil, err
		}
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("devserver: build UI server: %v", r)
		}
	}()
	srv := uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host:                host,
		Port:                port,
		TemporalGRPCAddress: frontend,
		TLS:                 uiTLS,
		EnableUI:            true,
		DefaultNamespace:    namespace,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		// The browser sends payloads to the codec server itself; the UI
		// server only tells it where (GET /api/v1/settings).
		Codec: uiconfig.Codec{Endpoint: codec},
	}))
	u := &ui{srv: srv, address: net.JoinHostPort(dialIP(host), strconv.Itoa(port)), done: make(chan error, 1)}
	go func() { u.done <- srv.Start() }()

	hc := &http.Client{Timeout: time.Second}
	url := "http://" + u.address + "/healthz"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			u.stop()
			return nil, err
		}
		if resp, err := hc.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return u, nil
			}
		}
		select {
		case err := <-u.done:
			return nil, fmt.Errorf("devserver: UI server stopped: %v", err)
		case <-ctx.Done():
			u.stop()
			return nil, fmt.Errorf("devserver: UI server not ready at %s: %w", u.address, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// uiTLSConfig is the UI server's TLS config for files: checked here, and
// handed over as data (base64 PEM), not paths, because the UI server exits
// the process (log.Fatal) on a file or PEM it cannot load.
func uiTLSConfig(files *localClientTLS) (uiconfig.TLS, error) {
	var out uiconfig.TLS
	read := func(path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("devserver: the UI's TLS: %w", err)
		}
		return b, nil
	}
	ca, err := read(files.ServerCAFile)
	if err != nil {
		return out, err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(ca) {
		return out, fmt.Errorf("devserver: the UI's TLS: no PEM certificate in %s", files.ServerCAFile)
	}
	out.CaData, out.EnableHostVerification = base64.StdEncoding.EncodeToString(ca), true
	if files.CertFile == "" {
		return out, nil
	}
	cert, err := read(files.CertFile)
	if err != nil {
		return out, err
	}
	key, err := read(files.KeyFile)
	if err != nil {
		return out, err
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		return out, fmt.Errorf("devserver: the UI's client certificate %s: %w", files.CertFile, err)
	}
	out.CertData, out.KeyData = base64.StdEncoding.EncodeToString(cert), base64.StdEncoding.EncodeToString(key)
	return out, nil
}

func (u *ui) stop() {
	u.srv.Stop()
	select {
	case <-u.done:
	case <-time.After(5 * time.Second):
	}
}
