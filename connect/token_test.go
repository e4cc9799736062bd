package connect

import (
	"context"
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
)

// TestTokenFile: --token-file sends the file's token as authorization:
// Bearer TOKEN over plaintext (unlike an API key, it turns no TLS on), reads
// the file again when it changes, comes from TOOLGATE_TOKEN_FILE unless
// isolated, is refused with an API key or when others may read it, and is
// never shown: Describe names the file.
func TestTokenFile(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	check := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		auth := md.Get("authorization")
		mu.Lock()
		seen = append(seen, strings.Join(auth, ","))
		mu.Unlock()
		if len(auth) != 1 || !strings.HasPrefix(auth[0], "Bearer good-") {
			return nil, status.Error(codes.Unauthenticated, "toolgate dev: the bearer token is not signed by this dev server's key")
		}
		return h(ctx, req)
	}
	addr := serve(t, grpc.UnaryInterceptor(check)) // plaintext
	dir := t.TempDir()
	file := writeFile(t, dir, "worker.token", "good-1\n")

	c, err := Settings{Address: addr, TokenFile: file, Env: env{}}.Resolve()
	require.NoError(t, err)
	require.Contains(t, c.Describe(), "plaintext")
	require.Contains(t, c.Describe(), "token from "+file)
	require.NotContains(t, c.Describe(), "good-1")
	require.NoError(t, dial(t, Settings{Address: addr, TokenFile: file}))
	mu.Lock()
	require.Equal(t, "Bearer good-1", seen[len(seen)-1])
	mu.Unlock()

	// The file changes (dev renews it): the next call sends the new token.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tc, _, err := Dial(ctx, Settings{Address: addr, TokenFile: file, Env: env{}}, nil)
	require.NoError(t, err)
	defer tc.Close()
	require.NoError(t, os.WriteFile(file, []byte("good-22\n"), 0o600))
	_, err = tc.WorkflowService().GetSystemInfo(ctx, nil)
	require.NoError(t, err)
	mu.Lock()
	require.Equal(t, "Bearer good-22", seen[len(seen)-1])
	mu.Unlock()

	// From the environment, unless isolated.
	c, err = Settings{Address: addr, Env: env{"TOOLGATE_TOKEN_FILE": file}}.Resolve()
	require.NoError(t, err)
	require.Contains(t, c.Describe(), "token from "+file)
	c, err = Settings{Address: addr, Isolated: true, Env: env{"TOOLGATE_TOKEN_FILE": file}}.Resolve()
	require.NoError(t, err)
	require.NotContains(t, c.Describe(), "token from")

	// A refused token says which file.
	bad := writeFile(t, dir, "old.token", "stale\n")
	err = dial(t, Settings{Address: addr, TokenFile: bad})
	require.ErrorContains(t, err, "refused the token of "+bad)
	require.NotContains(t, err.Error(), "stale")

	_, err = Settings{Address: addr, TokenFile: file, APIKey: "k", Env: env{}}.Resolve()
	require.ErrorContains(t, err, "both an API key")
	open := filepath.Join(dir, "open.token")
	require.NoError(t, os.WriteFile(open, []byte("good-3"), 0o644))
	require.NoError(t, os.Chmod(open, 0o644))
	_, err = Settings{Address: addr, TokenFile: open, Env: env{}}.Resolve()
	require.ErrorContains(t, err, "chmod 600")
	_, err = Settings{Address: addr, TokenFile: filepath.Join(dir, "missing"), Env: env{}}.Resolve()
	require.ErrorContains(t, err, "token file")
	empty := writeFile(t, dir, "empty.token", "\n")
	_, err = Settings{Address: addr, TokenFile: empty, Env: env{}}.Resolve()
	require.ErrorContains(t, err, "want one token")
}
