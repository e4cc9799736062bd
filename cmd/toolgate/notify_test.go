package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notifyReceiver is a webhook or Slack endpoint answering status, counting
// what it got.
func notifyReceiver(t *testing.T, status int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	n := new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		n.Add(1)
		w.WriteHeader(status)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, n
}

func runNotify(t *testing.T, file string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"notify", "test", file}, strings.NewReader(""), &stdout, &stderr)
	return stdout.String(), err
}

func writeNotifyFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

func TestNotifyTest(t *testing.T) {
	hook, hookHits := notifyReceiver(t, http.StatusOK)
	slack, slackHits := notifyReceiver(t, http.StatusOK)
	t.Setenv("TOOLGATE_TEST_HOOK_SECRET", "s3cret-value")
	file := writeNotifyFile(t, `targets:
  - name: ops
    webhook: `+hook.URL+`/hook/PATHSECRET
    secret: ${TOOLGATE_TEST_HOOK_SECRET}
  - name: team
    slack: `+slack.URL+`/services/T0/B0/XYZ
`)
	out, err := runNotify(t, file)
	require.NoError(t, err)
	assert.Equal(t, "ops (webhook): ok: HTTP 200\nteam (slack): ok: HTTP 200\n", out)
	assert.EqualValues(t, 1, hookHits.Load())
	assert.EqualValues(t, 1, slackHits.Load())
}

func TestNotifyTestFailure(t *testing.T) {
	hook, _ := notifyReceiver(t, http.StatusOK)
	slack, _ := notifyReceiver(t, http.StatusInternalServerError)
	file := writeNotifyFile(t, `targets:
  - name: ops
    webhook: `+hook.URL+`/hook
    secret: s3cret-value
  - name: team
    slack: `+slack.URL+`/services/T0/B0/XYZ
`)
	out, err := runNotify(t, file)
	require.EqualError(t, err, "1 of 2 targets failed")
	assert.Equal(t, "ops (webhook): ok: HTTP 200\nteam (slack): FAILED: HTTP 500: ok\n", out)
	assert.NotContains(t, out, "/services/T0/B0/XYZ")
}

func TestNotifyUsage(t *testing.T) {
	_, err := runNotify(t, "")
	require.Error(t, err)
	var stdout bytes.Buffer
	err = run(context.Background(), []string{"notify"}, strings.NewReader(""), &stdout, io.Discard)
	assert.EqualError(t, err, "usage: toolgate notify test FILE")
	_, err = runNotify(t, filepath.Join(t.TempDir(), "missing.yaml"))
	assert.ErrorContains(t, err, "notify file")
}
