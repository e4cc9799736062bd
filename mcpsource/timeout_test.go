package mcpsource

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// muteServer accepts every HTTP request and never answers it (until the
// client goes away or the test ends): a server that never initialises.
func muteServer(t *testing.T) (url string, requests chan string) {
	t.Helper()
	requests = make(chan string, 16)
	stop := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case requests <- r.Method:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() {
		close(stop)
		hs.Close()
	})
	return hs.URL, requests
}

// Opening a server that never answers initialize ends at its
// connect_timeout, with an error naming the server and the timeout — the
// caller's context has no deadline at all.
func TestConnectTimeoutEndsAServerThatNeverInitialises(t *testing.T) {
	url, requests := muteServer(t)
	cfg, err := Parse([]byte("servers:\n  mute:\n    url: " + url + "\n    connect_timeout: 200ms\n"))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		src, err := Open(context.Background(), cfg, Options{})
		if src != nil {
			_ = src.Close()
		}
		done <- err
	}()
	require.Equal(t, http.MethodPost, <-requests, "the server got the client's first request")
	var openErr error
	select {
	case openErr = <-done:
	case <-time.After(time.Minute): // a watchdog, so that a missing timeout fails instead of hanging
		t.Fatal("Open still waits for a server that never answers initialize, a minute on, with connect_timeout 200ms")
	}
	require.Error(t, openErr)
	assert.Contains(t, openErr.Error(), "MCP server mute: connecting: no answer to initialize within 200ms (its connect_timeout)")
	assert.True(t, errors.Is(openErr, context.DeadlineExceeded), "%v", openErr)
}

func TestConnectTimeoutDefaultsAndBounds(t *testing.T) {
	assert.Equal(t, DefaultConnectTimeout, ServerConfig{}.connectTimeout())
	assert.Equal(t, 2*time.Minute, ServerConfig{ConnectTimeout: "2m"}.connectTimeout())
	for _, bad := range []string{"soon", "0s", "-1s", "11m"} {
		_, err := Parse([]byte("servers:\n  a:\n    url: http://x\n    connect_timeout: " + bad + "\n"))
		assert.ErrorContains(t, err, "servers.a.connect_timeout: \""+bad+"\" is not a duration above 0s and up to 10m0s", bad)
	}
}
