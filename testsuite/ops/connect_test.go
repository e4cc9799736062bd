package ops_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/devtls"
	"github.com/toolgate/toolgate/testsuite/testenv"
)

// TestMutualTLS: against `toolgate dev` requiring client certificates, the
// toolgate worker process, the client commands (the walk-through), the inbox
// process and client.Dial all connect with the certificates `toolgate keys
// tls` made; without a certificate, with one of another CA, without the
// server's CA and in plaintext they are refused, each saying what to change.
func TestMutualTLS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	res := toolgate(t, "keys", "tls", dir)
	require.Equal(t, 0, res.code, res.stderr)
	ca, cert, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	other, err := devtls.Generate(filepath.Join(t.TempDir(), "other"), devtls.Options{})
	require.NoError(t, err)

	data := t.TempDir()
	dev := startToolgate(t, "dev", "--no-worker", "--data", data, "--address", "127.0.0.1:0",
		"--tls-cert", filepath.Join(dir, "server.pem"), "--tls-key", filepath.Join(dir, "server.key"), "--tls-client-ca", ca)
	address := strings.TrimPrefix(dev.waitLine(t, "ready ", 2*time.Minute), "ready ")
	mtls := []string{"--address", address, "--tls-ca", ca, "--tls-cert", cert, "--tls-key", key}

	// The client certificate alone is a person's: the worker adds dev's
	// worker token.
	w := startToolgate(t, append([]string{"worker", "--data", t.TempDir(), "--token-file", filepath.Join(data, "auth", devserver.WorkerTokenFile)}, mtls...)...)
	line := w.waitLine(t, "worker ready on ", time.Minute)
	require.Contains(t, line, "client certificate "+cert)
	require.Contains(t, line, "CA "+ca)

	id := "mtls-walk"
	res = toolgate(t, append([]string{"run", "--id", id, "--plan", writePlan(t)}, mtls...)...)
	require.Equal(t, 0, res.code, res.stderr)
	waitNext(t, id, "gate:close_ticket", mtls...)

	// The inbox process connects, and lists the waiting call.
	ib := startToolgate(t, append([]string{"inbox", "--listen", "127.0.0.1:0"}, mtls...)...)
	url := strings.Fields(strings.TrimPrefix(ib.waitLine(t, "approvals inbox at ", time.Minute), "approvals inbox at "))[0]
	req, err := http.NewRequest(http.MethodGet, url+"api/pending", nil)
	require.NoError(t, err)
	req.Header.Set("X-Toolgate-Inbox", "1")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// client.Dial connects with the same settings.
	c, err := tgclient.Dial(context.Background(), connect.Settings{Address: address, TLSCA: ca, TLSCert: cert, TLSKey: key, Isolated: true})
	require.NoError(t, err)
	st, err := c.State(context.Background(), id)
	c.Close()
	require.NoError(t, err)
	require.Len(t, st.Interrupts, 1)

	res = toolgate(t, append([]string{"approve", id, "c-3", "--as", "alice"}, mtls...)...)
	require.Equal(t, 0, res.code, res.stderr)
	waitCompleted(t, id, mtls...)

	for _, tc := range []struct {
		name string
		args []string
		hint string
	}{
		{"no client certificate", []string{"--tls-ca", ca}, "--tls-cert and --tls-key"},
		{"a certificate of another CA", []string{"--tls-ca", ca, "--tls-cert", other.ClientCert, "--tls-key", other.ClientKey}, "signed by a CA the server trusts"},
		{"the server's CA not trusted", []string{"--tls-cert", cert, "--tls-key", key}, "--tls-ca"},
		{"plaintext", nil, "may require TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := toolgate(t, append([]string{"status", id, "--address", address}, tc.args...)...)
			require.NotEqual(t, 0, res.code)
			require.Contains(t, res.stderr, tc.hint)
			require.Contains(t, res.stderr, address, "names where it tried")
		})
	}
}

// TestDevTLSWithoutClientCertificates: `toolgate dev --tls-cert --tls-key`
// serves TLS only: a client that trusts its CA connects with no client
// certificate, a plaintext one is refused; dev's own worker runs the
// walk-through.
func TestDevTLSWithoutClientCertificates(t *testing.T) {
	files, err := devtls.Generate(filepath.Join(t.TempDir(), "tls"), devtls.Options{})
	require.NoError(t, err)
	dev := startToolgate(t, "dev", "--data", t.TempDir(), "--address", "127.0.0.1:0", "--tls-cert", files.ServerCert, "--tls-key", files.ServerKey)
	address := strings.TrimPrefix(dev.waitLine(t, "ready ", 2*time.Minute), "ready ")
	// The stock way to trust a private CA, as a TOML profile of the temporal CLI.
	profile := filepath.Join(t.TempDir(), "temporal.toml")
	require.NoError(t, os.WriteFile(profile, []byte(fmt.Sprintf("[profile.rehearsal]\naddress = %q\n[profile.rehearsal.tls]\nserver_ca_cert_path = %q\n", address, files.CA)), 0o600))
	viaProfile := []string{"--config-file", profile, "--profile", "rehearsal"}
	id := "tls-walk"
	res := toolgate(t, append([]string{"run", "--id", id, "--plan", writePlan(t)}, viaProfile...)...)
	require.Equal(t, 0, res.code, res.stderr)
	waitNext(t, id, "gate:close_ticket", viaProfile...)
	res = toolgate(t, "status", id, "--address", address)
	require.NotEqual(t, 0, res.code, "plaintext is refused")
	require.Contains(t, res.stderr, "may require TLS")

	// A TLS client with the CA's pool connects: the certificate is the one
	// keys tls made for 127.0.0.1.
	pem, err := os.ReadFile(files.CA)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	conn, err := tls.Dial("tcp", address, &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}})
	require.NoError(t, err)
	require.NoError(t, conn.Close())
}

// TestAPIKey: an API key reaches the embedded server's frontend as
// `authorization: Bearer KEY` from TEMPORAL_API_KEY (the worker process),
// --api-key and a temporal.toml profile (the client commands); a command
// without it or with another is refused, saying so, and no output shows a
// key.
func TestAPIKey(t *testing.T) {
	const key = "tg-test-api-key-4f1c"
	files, err := devtls.Generate(filepath.Join(t.TempDir(), "tls"), devtls.Options{})
	require.NoError(t, err)
	var mu sync.Mutex
	seen := map[string]int{}
	check := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		auth := strings.Join(md.Get("authorization"), ",")
		mu.Lock()
		seen[auth]++
		mu.Unlock()
		if auth != "Bearer "+key {
			return nil, status.Error(codes.Unauthenticated, "Request unauthorized.")
		}
		return h(ctx, req)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{DataDir: t.TempDir(), SearchAttributes: testenv.SearchAttributes,
		TLS:                  &devserver.TLSOptions{CertFile: files.ServerCert, KeyFile: files.ServerKey},
		FrontendInterceptors: []grpc.UnaryServerInterceptor{check}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	address := srv.Address()

	w := startToolgateEnv(t, []string{"TEMPORAL_API_KEY=" + key}, "worker", "--data", t.TempDir(), "--address", address, "--tls-ca", files.CA)
	line := w.waitLine(t, "worker ready on ", time.Minute)
	require.Contains(t, line, "API key from TEMPORAL_API_KEY")
	require.NotContains(t, line, key)

	id := "api-key-walk"
	withFlag := []string{"--address", address, "--tls-ca", files.CA, "--api-key", key}
	res := toolgate(t, append([]string{"run", "--id", id, "--plan", writePlan(t)}, withFlag...)...)
	require.Equal(t, 0, res.code, res.stderr)
	profile := filepath.Join(t.TempDir(), "temporal.toml")
	require.NoError(t, os.WriteFile(profile, []byte(fmt.Sprintf("[profile.cloud]\naddress = %q\napi_key = %q\n[profile.cloud.tls]\nserver_ca_cert_path = %q\n", address, key, files.CA)), 0o600))
	viaProfile := []string{"--config-file", profile, "--profile", "cloud"}
	waitNext(t, id, "gate:close_ticket", viaProfile...)
	res = toolgate(t, append([]string{"approve", id, "c-3", "--as", "alice"}, viaProfile...)...)
	require.Equal(t, 0, res.code, res.stderr)
	waitCompleted(t, id, withFlag...)

	res = toolgate(t, "status", id, "--address", address, "--tls-ca", files.CA)
	require.NotEqual(t, 0, res.code)
	require.Contains(t, res.stderr, "wants credentials")
	res = toolgate(t, "status", id, "--address", address, "--tls-ca", files.CA, "--api-key", "another-key-77")
	require.NotEqual(t, 0, res.code)
	require.Contains(t, res.stderr, "refused these credentials")
	require.NotContains(t, res.stdout+res.stderr, "another-key-77")

	mu.Lock()
	defer mu.Unlock()
	require.Greater(t, seen["Bearer "+key], 10, "the worker's polls and the commands carried the key: %v", seen)
	require.Greater(t, seen[""], 0, "a command without the key was seen, and refused")
}
