package devserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/devtls"
)

// certs makes a CA with its server and client certificates in a temp dir.
func certs(t *testing.T) devtls.Files {
	t.Helper()
	f, err := devtls.Generate(filepath.Join(t.TempDir(), "tls"), devtls.Options{})
	require.NoError(t, err)
	return f
}

// clientTLS is a client's TLS config: trusting caFile, presenting the
// certificate of certFile and keyFile when they are set.
func clientTLS(t *testing.T, caFile, certFile, keyFile string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		require.NoError(t, err)
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// dialTLS dials addr with tc (nil: plaintext); the SDK's Dial checks the
// connection with a call, so a refused handshake is an error here.
func dialTLS(addr, namespace string, tc *tls.Config) (client.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return client.DialContext(ctx, client.Options{
		HostPort:          addr,
		Namespace:         namespace,
		Logger:            quietLogger(),
		ConnectionOptions: client.ConnectionOptions{TLS: tc},
	})
}

// refused asserts that a client with tc cannot use the frontend: the dial
// fails, or (TLS 1.3 checks the client's certificate after the client's
// side of the handshake is done) the first call does.
func refused(t *testing.T, s *Server, tc *tls.Config) {
	t.Helper()
	c, err := dialTLS(s.Address(), s.Namespace(), tc)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.Namespace()})
		cancel()
		c.Close()
	}
	require.Error(t, err, "the frontend serves this client")
	t.Logf("refused: %v", err)
}

// With TLS and a client CA, the frontend serves only clients with a
// certificate of that CA; the server's own parts (system worker, UI, Start's
// client) work through the internal frontend.
func TestMutualTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	f := certs(t)
	const codec = "http://127.0.0.1:8081/codec"
	s := startServer(t, Options{
		DataDir:          t.TempDir(),
		UIAddress:        "127.0.0.1:0",
		UICodecEndpoint:  codec,
		HTTPAPI:          true,
		SearchAttributes: testSearchAttributes,
		TLS:              &TLSOptions{CertFile: f.ServerCert, KeyFile: f.ServerKey, ClientCAFile: f.CA},
		Logger:           slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	require.True(t, s.TLS())
	require.NotEqual(t, s.Address(), s.InternalAddress())

	mtls := clientTLS(t, f.CA, f.ClientCert, f.ClientKey)
	c, err := dialTLS(s.Address(), s.Namespace(), mtls)
	require.NoError(t, err, "a client with the CA's certificate connects")
	defer c.Close()
	w := startWorker(t, c)
	defer w.Stop()

	t.Run("client certificate", func(t *testing.T) {
		_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.Namespace()})
		require.NoError(t, err)
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "hello-mtls", TaskQueue: taskQueue}, Hello, "mtls")
		require.NoError(t, err)
		var got string
		require.NoError(t, run.Get(ctx, &got))
		assert.Equal(t, "hello mtls", got)
	})

	t.Run("no client certificate", func(t *testing.T) {
		refused(t, s, clientTLS(t, f.CA, "", ""))
	})

	t.Run("certificate of another CA", func(t *testing.T) {
		other := certs(t)
		// It trusts the server (f.CA) and presents a client certificate that
		// other's CA signed.
		refused(t, s, clientTLS(t, f.CA, other.ClientCert, other.ClientKey))
	})

	t.Run("plaintext", func(t *testing.T) {
		refused(t, s, nil)
	})

	t.Run("schedule fires", func(t *testing.T) {
		// Schedules run on the server's system worker (the per-namespace
		// worker), whose SDK client reaches the frontend without a client
		// certificate: through the internal frontend.
		h, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
			ID:                 "tls-schedule",
			Spec:               client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: time.Hour}}},
			Action:             &client.ScheduleWorkflowAction{ID: "tls-scheduled", Workflow: Hello, Args: []any{"schedule"}, TaskQueue: taskQueue},
			TriggerImmediately: true,
		})
		require.NoError(t, err)
		defer func() { _ = h.Delete(context.Background()) }()
		var got string
		require.Eventually(t, func() bool {
			desc, err := h.Describe(ctx)
			if err != nil || len(desc.Info.RecentActions) == 0 {
				return false
			}
			a := desc.Info.RecentActions[0].StartWorkflowResult
			run := c.GetWorkflow(ctx, a.WorkflowID, a.FirstExecutionRunID)
			return run.Get(ctx, &got) == nil
		}, 30*time.Second, 200*time.Millisecond, "the schedule started a workflow")
		assert.Equal(t, "hello schedule", got)
	})

	t.Run("ui", func(t *testing.T) {
		// The UI's API reaches the frontend (through the internal one).
		resp, err := http.Get("http://" + s.UIAddress() + "/api/v1/namespaces/" + s.Namespace())
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		assert.Contains(t, string(body), `"`+s.Namespace()+`"`)

		// The UI tells the browser where the codec server is.
		resp, err = http.Get("http://" + s.UIAddress() + "/api/v1/settings")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var settings struct{ Codec struct{ Endpoint string } }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&settings))
		assert.Equal(t, codec, settings.Codec.Endpoint)
	})

	t.Run("http api", func(t *testing.T) {
		require.NotEmpty(t, s.HTTPAddress())
		url := "https://" + s.HTTPAddress() + "/api/v1/namespaces/" + s.Namespace()
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: mtls}}
		resp, err := hc.Get(url)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, string(body))

		hc = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS(t, f.CA, "", "")}}
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			t.Fatalf("the HTTP API answers a client without a certificate: %s", resp.Status)
		}
		if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + s.HTTPAddress() + "/api/v1/namespaces/" + s.Namespace()); err == nil {
			resp.Body.Close()
			assert.NotEqual(t, http.StatusOK, resp.StatusCode, "the HTTP API answers plain http")
		}
	})

	t.Run("internal address", func(t *testing.T) {
		// The documented trade-off: a local process needs no certificate on
		// the internal frontend, which listens on 127.0.0.1 only.
		assert.True(t, strings.HasPrefix(s.InternalAddress(), "127.0.0.1:"), s.InternalAddress())
		ic, err := dialTLS(s.InternalAddress(), s.Namespace(), nil)
		require.NoError(t, err)
		ic.Close()
	})
}

// With TLS and no client CA, the frontend serves TLS to any client that
// trusts its CA, with no client certificate, and refuses plaintext.
func TestTLSWithoutClientCA(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := certs(t)
	dir := t.TempDir()
	s := startServer(t, Options{
		DataDir: dir,
		TLS:     &TLSOptions{CertFile: f.ServerCert, KeyFile: f.ServerKey},
	})
	require.True(t, s.TLS())
	c, err := dialTLS(s.Address(), s.Namespace(), clientTLS(t, f.CA, "", ""))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.Namespace()})
	require.NoError(t, err)

	refused(t, s, nil)
	other := certs(t)
	refused(t, s, clientTLS(t, other.CA, "", "")) // a client that trusts another CA does not trust this server
	c.Close()
	stopServer(t, s)

	// The same data without TLS: plaintext again (the cluster's address
	// the first start recorded is the internal frontend's, now gone).
	s = startServer(t, Options{DataDir: dir, UIAddress: "127.0.0.1:0"})
	require.False(t, s.TLS())
	require.Equal(t, s.Address(), s.InternalAddress())
	c = newClient(t, s)
	defer c.Close()
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.Namespace()})
	require.NoError(t, err)
	resp, err := http.Get("http://" + s.UIAddress() + "/api/v1/namespaces/" + s.Namespace())
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// Bad TLS options are refused before anything starts (the server would exit
// the process on a file it cannot load).
func TestTLSOptionErrors(t *testing.T) {
	f := certs(t)
	ctx := context.Background()
	for name, o := range map[string]*TLSOptions{
		"no key":      {CertFile: f.ServerCert},
		"missing":     {CertFile: f.ServerCert + ".missing", KeyFile: f.ServerKey},
		"wrong key":   {CertFile: f.ServerCert, KeyFile: f.ClientKey},
		"bad CA file": {CertFile: f.ServerCert, KeyFile: f.ServerKey, ClientCAFile: f.ServerKey},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		_, err := Start(ctx, Options{DataDir: dir, TLS: o})
		assert.Error(t, err, name)
		_, statErr := os.Stat(dir)
		assert.True(t, os.IsNotExist(statErr), "%s: nothing made", name)
	}
}
