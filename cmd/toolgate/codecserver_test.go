package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/toolgate/toolgate/encryption"
)

// startCodecServer runs `toolgate codec-server args...` until the test ends
// and returns the URL it prints.
func startCodecServer(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, append([]string{"codec-server"}, args...), strings.NewReader(""), pw, io.Discard)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("codec-server did not stop")
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err, "no line printed (the command's error: see the cleanup)")
	go io.Copy(io.Discard, pr)
	require.True(t, strings.HasPrefix(line, "codec server at http://127.0.0.1:"), line)
	return strings.TrimSpace(strings.TrimPrefix(line, "codec server at "))
}

func TestCodecServerCommand(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "enc.json")
	_, _, err := encryption.AddKey(keyFile)
	require.NoError(t, err)
	authFile := filepath.Join(dir, "auth")
	require.NoError(t, os.WriteFile(authFile, []byte("Bearer t0ken\n"), 0o600))
	k, err := encryption.LoadKeyring(keyFile)
	require.NoError(t, err)

	url := startCodecServer(t, "--listen", "127.0.0.1:0", "--encryption-key-file", keyFile, "--auth-file", authFile,
		"--origin", "http://127.0.0.1:8233", "--namespace", "default")

	in, err := converter.GetDefaultDataConverter().ToPayload("the secret input")
	require.NoError(t, err)
	enc, err := k.Codec().Encode([]*commonpb.Payload{in})
	require.NoError(t, err)
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: enc})
	require.NoError(t, err)

	decode := func(auth, origin string) (*http.Response, string) {
		req, err := http.NewRequest("POST", url+"/decode", strings.NewReader(string(body)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Namespace", "default")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(b)
	}
	resp, out := decode("Bearer t0ken", "http://127.0.0.1:8233")
	require.Equal(t, http.StatusOK, resp.StatusCode, out)
	assert.Equal(t, "http://127.0.0.1:8233", resp.Header.Get("Access-Control-Allow-Origin"))
	var got commonpb.Payloads
	require.NoError(t, protojson.Unmarshal([]byte(out), &got))
	require.Len(t, got.Payloads, 1)
	assert.True(t, proto.Equal(in, got.Payloads[0]))

	resp, _ = decode("", "")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = decode("Bearer t0ken", "http://localhost:8233")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "only the --origin given")
}

func TestCodecServerCommandRefuses(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "enc.json")
	_, _, err := encryption.AddKey(keyFile)
	require.NoError(t, err)
	authFile := filepath.Join(dir, "auth")
	require.NoError(t, os.WriteFile(authFile, []byte("Bearer t0ken"), 0o600))
	openAuth := filepath.Join(dir, "auth-open")
	require.NoError(t, os.WriteFile(openAuth, []byte("Bearer t0ken"), 0o644))
	require.NoError(t, os.Chmod(openAuth, 0o644))
	twoLines := filepath.Join(dir, "auth-two")
	require.NoError(t, os.WriteFile(twoLines, []byte("Bearer a\nBearer b\n"), 0o600))
	openKeys := filepath.Join(dir, "open.json")
	data, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(openKeys, data, 0o644))
	require.NoError(t, os.Chmod(openKeys, 0o644))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--encryption-key-file"},
		{[]string{"--encryption-key-file", filepath.Join(dir, "none.json")}, "toolgate keys encryption"},
		{[]string{"--encryption-key-file", openKeys}, "chmod 600"},
		{[]string{"--encryption-key-file", keyFile, "--listen", "0.0.0.0:0"}, "--auth-file"},
		{[]string{"--encryption-key-file", keyFile, "--listen", "0.0.0.0:0", "--auth-file", authFile}, "TLS"},
		{[]string{"--encryption-key-file", keyFile, "--tls-cert", "c.pem"}, "--tls-key"},
		{[]string{"--encryption-key-file", keyFile, "--auth-file", openAuth}, "chmod 600"},
		{[]string{"--encryption-key-file", keyFile, "--auth-file", twoLines}, "one line"},
		{[]string{"--encryption-key-file", keyFile, "--origin", "*"}, "--origin"},
		{[]string{"--encryption-key-file", keyFile, "--origin", "http://127.0.0.1:8233/ui"}, "--origin"},
		{[]string{"--encryption-key-file", keyFile, "--listen", "nope"}, "HOST:PORT"},
		{[]string{"--encryption-key-file", keyFile, "extra"}, "no arguments"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := run(ctx, append([]string{"codec-server"}, tc.args...), strings.NewReader(""), io.Discard, io.Discard)
		cancel()
		if assert.Error(t, err, "%q", tc.args) {
			assert.Contains(t, err.Error(), tc.want, "%q", tc.args)
		}
	}
}
