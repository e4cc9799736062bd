package mcpsource

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hangServer's hang tool holds its call until the test releases it (or the
// call is cancelled); quick answers at once. It records the session of
// every call.
type hangServer struct {
	*testServer
	entered chan string // a hang call's idempotency key, once the server holds it
	release chan struct{}

	mu       sync.Mutex
	sessions map[string]bool
}

func newHangServer(t *testing.T) *hangServer {
	hs := &hangServer{entered: make(chan string, 16), release: make(chan struct{}), sessions: map[string]bool{}}
	seen := func(req *mcp.CallToolRequest) {
		hs.mu.Lock()
		defer hs.mu.Unlock()
		hs.sessions[req.Session.ID()] = true
	}
	hs.testServer = serve(t, func(s *mcp.Server) {
		addTool(s, "hang", nil, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			seen(req)
			hs.entered <- fmt.Sprint(req.Params.Meta[MetaIdempotencyKey])
			select {
			case <-hs.release:
				return textResult("late"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
		addTool(s, "quick", nil, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			seen(req)
			return textResult("quick"), nil
		})
	})
	return hs
}

func (hs *hangServer) sessionCount() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return len(hs.sessions)
}

// A call that hangs on the server holds one session, not the server: another
// run's call to the same server completes while the first still hangs.
func TestAHangingCallDoesNotHoldTheServer(t *testing.T) {
	hs := newHangServer(t)
	src := open(t, "servers:\n  s:\n    url: "+hs.url()+"\n", Options{})
	hung := make(chan error, 1)
	go func() {
		_, err := run(t, src, "s__hang", "run-a/c-1", `{}`, nil)
		hung <- err
	}()
	require.Equal(t, "run-a/c-1", <-hs.entered)

	quick := make(chan error, 1)
	go func() {
		_, err := run(t, src, "s__quick", "run-b/c-1", `{}`, nil)
		quick <- err
	}()
	select {
	case err := <-quick:
		require.NoError(t, err, "run-b's call")
	case err := <-hung:
		t.Fatalf("run-a's hanging call ended (%v) before run-b's call to the same server did: run-b's call waited behind it", err)
	}
	close(hs.release)
	require.NoError(t, <-hung, "run-a's call, once the server lets it go")
	assert.Equal(t, 2, hs.sessionCount(), "the calls ran on two sessions")
}

// The pool is bounded by the server's sessions, and idle sessions are reused.
func TestSessionPoolIsBoundedAndReused(t *testing.T) {
	hs := newHangServer(t)
	src := open(t, "servers:\n  s:\n    url: "+hs.url()+"\n    sessions: 2\n", Options{})
	for i := range 3 {
		_, err := run(t, src, "s__quick", fmt.Sprintf("k-%d", i), `{}`, nil)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, hs.sessionCount(), "calls one after the other reuse the idle session")

	const calls = 6
	errs := make(chan error, calls)
	for i := range calls {
		go func() {
			_, err := run(t, src, "s__hang", fmt.Sprintf("h-%d", i), `{}`, nil)
			errs <- err
		}()
	}
	for range 2 { // two calls are held, one on each session; the others wait for one
		select {
		case <-hs.entered:
		case err := <-errs:
			t.Fatalf("a call ended (%v) before two were held at once", err)
		}
	}
	close(hs.release)
	for range calls {
		require.NoError(t, <-errs)
	}
	assert.Equal(t, 2, hs.sessionCount(), "never more sessions than the file allows")
}
