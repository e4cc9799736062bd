package connect

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/toolgate/toolgate/devtls"
	"github.com/toolgate/toolgate/encryption"
)

// env is an environment for Settings.Env: only what a test sets.
type env map[string]string

func (e env) Environ() []string {
	var out []string
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}

func (e env) LookupEnv(k string) (string, bool) { v, ok := e[k]; return v, ok }

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

func TestLayersOverrideInOrder(t *testing.T) {
	dir := t.TempDir()
	toml := writeFile(t, dir, "temporal.toml", `
[profile.default]
address = "profile-default:7233"
namespace = "from-profile"

[profile.prod]
address = "prod.example:7233"
namespace = "prod-ns"
api_key = "profile-key"
`)
	// defaults only (an empty environment, a file that does not exist)
	c, err := Settings{ConfigFile: filepath.Join(dir, "none.toml"), Env: env{}}.Resolve()
	require.NoError(t, err)
	require.Equal(t, DefaultAddress, c.Address())
	require.Equal(t, DefaultNamespace, c.Namespace())
	require.Nil(t, c.Options.ConnectionOptions.TLS)

	// the profile file's default profile
	c, err = Settings{ConfigFile: toml, Env: env{}}.Resolve()
	require.NoError(t, err)
	require.Equal(t, "profile-default:7233", c.Address())
	require.Equal(t, "from-profile", c.Namespace())

	// TEMPORAL_PROFILE picks a profile, TEMPORAL_NAMESPACE overrides it
	c, err = Settings{ConfigFile: toml, Env: env{"TEMPORAL_PROFILE": "prod", "TEMPORAL_NAMESPACE": "env-ns"}}.Resolve()
	require.NoError(t, err)
	require.Equal(t, "prod.example:7233", c.Address())
	require.Equal(t, "env-ns", c.Namespace())
	require.NotNil(t, c.Options.ConnectionOptions.TLS, "an API key turns TLS on")
	require.NotNil(t, c.Options.Credentials)

	// flags override both
	c, err = Settings{ConfigFile: toml, Profile: "prod", Address: "flag:1", Namespace: "flag-ns", Env: env{"TEMPORAL_ADDRESS": "env:2"}}.Resolve()
	require.NoError(t, err)
	require.Equal(t, "flag:1", c.Address())
	require.Equal(t, "flag-ns", c.Namespace())

	// TEMPORAL_CONFIG_FILE names the file
	c, err = Settings{Env: env{"TEMPORAL_CONFIG_FILE": toml}}.Resolve()
	require.NoError(t, err)
	require.Equal(t, "profile-default:7233", c.Address())

	// a profile asked for and missing is an error
	_, err = Settings{ConfigFile: toml, Profile: "staging", Env: env{}}.Resolve()
	require.ErrorContains(t, err, "staging")

	// Isolated reads neither the file nor the environment
	c, err = Settings{ConfigFile: toml, Isolated: true, Env: env{"TEMPORAL_ADDRESS": "env:2", "TEMPORAL_API_KEY": "k"}}.Resolve()
	require.NoError(t, err)
	require.Equal(t, DefaultAddress, c.Address())
	require.Nil(t, c.Options.Credentials)
}

// A profile file is shared with newer temporal CLIs: keys this version does
// not know are ignored, not refused.
func TestProfileWithNewerKeys(t *testing.T) {
	toml := writeFile(t, t.TempDir(), "temporal.toml", `
[profile.default]
address = "a:1"
some_future_setting = "x"

[profile.default.future_table]
y = 1
`)
	c, err := Settings{ConfigFile: toml, Env: env{}}.Resolve()
	require.NoError(t, err)
	require.Equal(t, "a:1", c.Address())
}

func TestFlags(t *testing.T) {
	var s Settings
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	s.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--address", "h:1", "--tls", "--tls-ca", "ca.pem", "--api-key", "sekrit", "--tls-server-name", "srv"}))
	require.Equal(t, "h:1", s.Address)
	require.NotNil(t, s.TLS)
	require.True(t, *s.TLS)
	require.Equal(t, "ca.pem", s.TLSCA)
	require.Equal(t, "srv", s.TLSServerName)
	var off Settings
	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	off.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--tls=false", "--api-key", "k"}))
	c, err := Settings{TLS: off.TLS, APIKey: "k", Env: env{}}.Resolve()
	require.NoError(t, err)
	require.True(t, c.Options.ConnectionOptions.TLSDisabled, "--tls=false keeps TLS off even with an API key")
	require.Contains(t, c.Describe(), "plaintext")
}

func TestHalfACertificateIsRefused(t *testing.T) {
	_, err := Settings{TLSCert: "client.pem", Env: env{}}.Resolve()
	require.ErrorContains(t, err, "--tls-key")
	_, err = Settings{Env: env{"TEMPORAL_TLS_CLIENT_KEY_PATH": "k.pem"}}.Resolve()
	require.ErrorContains(t, err, "--tls-cert")
}

// Describe names where an API key came from and the files in use, never a key.
func TestDescribeNeverShowsAKey(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "keys.json")
	_, _, err := encryption.AddKey(keyFile)
	require.NoError(t, err)
	raw, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	toml := writeFile(t, dir, "temporal.toml", "[profile.default]\napi_key = \"profile-secret-key\"\n")
	for _, tc := range []struct {
		s    Settings
		from string
	}{
		{Settings{APIKey: "flag-secret-key", Env: env{}}, "--api-key"},
		{Settings{Env: env{"TEMPORAL_API_KEY": "env-secret-key"}}, "TEMPORAL_API_KEY"},
		{Settings{ConfigFile: toml, Env: env{}}, "the profile"},
	} {
		tc.s.EncryptionKeyFile = keyFile
		c, err := tc.s.Resolve()
		require.NoError(t, err)
		d := c.Describe()
		require.Contains(t, d, "API key from "+tc.from)
		require.Contains(t, d, "payloads encrypted with "+keyFile)
		require.NotContains(t, d, "secret-key")
		keys := 0
		for _, field := range strings.Split(string(raw), "\"") {
			if len(field) >= 40 { // the base64 of a 32-byte key
				keys++
				require.NotContains(t, d, field)
			}
		}
		require.Equal(t, 1, keys, "the key file's one key was looked for")
	}
}

func TestWorkerRefusesARemoteCodec(t *testing.T) {
	toml := writeFile(t, t.TempDir(), "temporal.toml", "[profile.default]\n[profile.default.codec]\nendpoint = \"http://127.0.0.1:8081\"\n")
	c, err := Settings{ConfigFile: toml, Env: env{}}.Resolve()
	require.NoError(t, err, "a client command without a key file uses the codec server")
	require.NotNil(t, c.Options.DataConverter)
	require.Contains(t, c.Describe(), "codec server http://127.0.0.1:8081")
	_, err = Settings{ConfigFile: toml, Worker: true, Env: env{}}.Resolve()
	require.ErrorContains(t, err, "--encryption-key-file")
}

// frontend is a gRPC server with Temporal's workflow service (every call
// unimplemented but GetSystemInfo), enough for the SDK's dial.
type frontend struct {
	workflowservice.UnimplementedWorkflowServiceServer
}

func (frontend) GetSystemInfo(context.Context, *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	return &workflowservice.GetSystemInfoResponse{}, nil
}

// serve starts a fake frontend on loopback and returns its address.
func serve(t *testing.T, opts ...grpc.ServerOption) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(opts...)
	workflowservice.RegisterWorkflowServiceServer(srv, frontend{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

func serverTLS(t *testing.T, f devtls.Files, clientCA string) grpc.ServerOption {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	require.NoError(t, err)
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		pem, err := os.ReadFile(clientCA)
		require.NoError(t, err)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(pem))
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return grpc.Creds(credentials.NewTLS(cfg))
}

func dial(t *testing.T, s Settings) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.Env = env{}
	c, _, err := Dial(ctx, s, nil)
	if err == nil {
		c.Close()
	}
	return err
}

// TestHandshakes dials a frontend that requires client certificates (and
// one that speaks plaintext) the ways people get it right and wrong: the
// right settings connect, and each mistake is refused with what to change.
func TestHandshakes(t *testing.T) {
	good, err := devtls.Generate(filepath.Join(t.TempDir(), "good"), devtls.Options{})
	require.NoError(t, err)
	other, err := devtls.Generate(filepath.Join(t.TempDir(), "other"), devtls.Options{})
	require.NoError(t, err)
	mtls := serve(t, serverTLS(t, good, good.CA))
	plain := serve(t)

	require.NoError(t, dial(t, Settings{Address: mtls, TLSCA: good.CA, TLSCert: good.ClientCert, TLSKey: good.ClientKey}))
	for _, tc := range []struct {
		name string
		s    Settings
		hint string
	}{
		// (a refusal of the client certificate may come as the server's
		// alert or, by timing, as a closed connection: either says what to do)
		{"no client certificate", Settings{Address: mtls, TLSCA: good.CA}, "--tls-cert and --tls-key"},
		{"a certificate from another CA", Settings{Address: mtls, TLSCA: good.CA, TLSCert: other.ClientCert, TLSKey: other.ClientKey}, "signed by a CA the server trusts"},
		{"a server CA not trusted", Settings{Address: mtls, TLSCA: other.CA, TLSCert: good.ClientCert, TLSKey: good.ClientKey}, "not signed by a CA this client trusts"},
		{"plaintext to a TLS server", Settings{Address: mtls}, "may require TLS"},
		{"TLS to a plaintext server", Settings{Address: plain, TLSCA: good.CA}, "does not speak TLS"},
		{"nobody answering", Settings{Address: closedPort(t)}, "nothing answers there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := dial(t, tc.s)
			require.Error(t, err)
			t.Log(err)
			require.Contains(t, err.Error(), tc.hint)
			require.Contains(t, err.Error(), tc.s.Address, "names where it tried")
		})
	}
}

func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestAPIKey: the key goes as authorization: Bearer KEY (over TLS), from the
// flag, the variable or the profile; a wrong one is refused saying so.
func TestAPIKey(t *testing.T) {
	files, err := devtls.Generate(filepath.Join(t.TempDir(), "tls"), devtls.Options{})
	require.NoError(t, err)
	var seen bytes.Buffer
	check := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		auth := md.Get("authorization")
		seen.WriteString(strings.Join(auth, ",") + "\n")
		if len(auth) != 1 || auth[0] != "Bearer right-key" {
			return nil, status.Error(codes.Unauthenticated, "Request unauthorized.")
		}
		return h(ctx, req)
	}
	addr := serve(t, serverTLS(t, files, ""), grpc.UnaryInterceptor(check))
	toml := writeFile(t, t.TempDir(), "temporal.toml", "[profile.default]\napi_key = \"right-key\"\n[profile.default.tls]\nserver_ca_cert_path = \""+files.CA+"\"\n")

	require.NoError(t, dial(t, Settings{Address: addr, TLSCA: files.CA, APIKey: "right-key"}))
	require.NoError(t, dial(t, Settings{Address: addr, ConfigFile: toml}))
	s := Settings{Address: addr, TLSCA: files.CA}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.Env = env{"TEMPORAL_API_KEY": "right-key"}
	c, _, err := Dial(ctx, s, nil)
	require.NoError(t, err)
	c.Close()
	require.Contains(t, seen.String(), "Bearer right-key")

	err = dial(t, Settings{Address: addr, TLSCA: files.CA, APIKey: "wrong-key"})
	require.ErrorContains(t, err, "refused these credentials")
	require.NotContains(t, err.Error(), "wrong-key", "the key is not in the error")
	err = dial(t, Settings{Address: addr, TLSCA: files.CA})
	require.ErrorContains(t, err, "wants credentials")
}

// With a key file, the client's payloads and failure messages are encrypted.
func TestKeyFileEncrypts(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "keys.json")
	_, _, err := encryption.AddKey(keyFile)
	require.NoError(t, err)
	c, err := Settings{EncryptionKeyFile: keyFile, Env: env{}}.Resolve()
	require.NoError(t, err)
	p, err := c.Options.DataConverter.ToPayload("TKT-3")
	require.NoError(t, err)
	require.Equal(t, encryption.MetadataEncoding, string(p.GetMetadata()["encoding"]))
	require.NotContains(t, string(p.GetData()), "TKT-3")
	f := c.Options.FailureConverter.ErrorToFailure(errors.New("refund of 13579 failed"))
	require.NotContains(t, f.GetMessage(), "13579")

	_, err = Settings{EncryptionKeyFile: filepath.Join(t.TempDir(), "missing.json"), Env: env{}}.Resolve()
	require.ErrorContains(t, err, "missing.json")
}
