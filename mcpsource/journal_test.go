package mcpsource

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chargeServer counts the calls of each tool.
type chargeServer struct {
	*testServer
	charges, reads, fails atomic.Int32
}

func newChargeServer(t *testing.T) *chargeServer {
	cs := &chargeServer{}
	cs.testServer = serve(t, func(s *mcp.Server) {
		addTool(s, "charge", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := cs.charges.Add(1)
			return &mcp.CallToolResult{StructuredContent: map[string]any{"charge": n}}, nil
		})
		addTool(s, "balance", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult("balance " + string(rune('0'+cs.reads.Add(1)))), nil
		})
		addTool(s, "refund", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			cs.fails.Add(1)
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such charge"}}}, nil
		})
	})
	return cs
}

func chargeFile(url string) string {
	return "servers:\n  pay:\n    url: " + url + "\n    tools:\n      charge: {destructive: true}\n      balance: {destructive: false}\n"
}

func openJournal(t *testing.T) (*FileJournal, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := OpenJournal(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	return j, path
}

func TestJournalAnswersARetryWithoutCallingTheServer(t *testing.T) {
	cs := newChargeServer(t)
	j, path := openJournal(t)
	type after struct{ name, key string }
	var mu sync.Mutex
	var afters []after
	src := open(t, chargeFile(cs.url()), Options{Journal: j, AfterCall: func(name, key string) {
		// The result is kept before AfterCall runs.
		res, ok, err := j.Get(context.Background(), key)
		assert.NoError(t, err)
		assert.True(t, ok, "AfterCall runs after the Put")
		assert.Contains(t, string(res), `"charge"`)
		mu.Lock()
		afters = append(afters, after{name, key})
		mu.Unlock()
	}})

	first, err := run(t, src, "pay__charge", "wf/r/c-1", `{"amount":5}`, nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"charge":1}`, string(first.Result))

	again, err := run(t, src, "pay__charge", "wf/r/c-1", `{"amount":5}`, nil)
	require.NoError(t, err)
	assert.JSONEq(t, string(first.Result), string(again.Result))
	assert.Equal(t, int32(1), cs.charges.Load(), "the server is called once per idempotency key")
	mu.Lock()
	assert.Equal(t, []after{{"pay__charge", "wf/r/c-1"}}, afters, "AfterCall runs only when the server was called")
	mu.Unlock()

	// Another key is another call.
	_, err = run(t, src, "pay__charge", "wf/r/c-2", `{"amount":5}`, nil)
	require.NoError(t, err)
	assert.Equal(t, int32(2), cs.charges.Load())
	mu.Lock()
	assert.Len(t, afters, 2)
	mu.Unlock()

	// The journal outlives the worker.
	require.NoError(t, j.Close())
	j2, err := OpenJournal(path)
	require.NoError(t, err)
	defer j2.Close()
	res, ok, err := j2.Get(context.Background(), "wf/r/c-1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.JSONEq(t, `{"charge":1}`, string(res))
}

func TestJournalKeepsOnlyDestructiveSuccesses(t *testing.T) {
	cs := newChargeServer(t)
	j, _ := openJournal(t)
	var afters atomic.Int32
	src := open(t, chargeFile(cs.url()), Options{Journal: j, AfterCall: func(string, string) { afters.Add(1) }})

	// Reads are memoized by the workflow, not journaled here.
	for range 2 {
		_, err := run(t, src, "pay__balance", "k-read", `{}`, nil)
		require.NoError(t, err)
	}
	assert.Equal(t, int32(2), cs.reads.Load())
	_, ok, err := j.Get(context.Background(), "k-read")
	require.NoError(t, err)
	assert.False(t, ok)

	// A failed call is not kept: calling again asks the server again.
	for range 2 {
		_, err := run(t, src, "pay__refund", "k-refund", `{}`, nil)
		require.Error(t, err)
	}
	assert.Equal(t, int32(2), cs.fails.Load())
	_, ok, err = j.Get(context.Background(), "k-refund")
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Zero(t, afters.Load())
}

func TestJournalFileIsPrivate(t *testing.T) {
	cs := newChargeServer(t)
	j, path := openJournal(t)
	src := open(t, chargeFile(cs.url()), Options{Journal: j})
	_, err := run(t, src, "pay__charge", "k", `{}`, nil)
	require.NoError(t, err)
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if os.IsNotExist(err) && p != path {
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), p)
	}

	// An older, readable journal is made private when opened.
	old := filepath.Join(t.TempDir(), "old.db")
	require.NoError(t, os.WriteFile(old, nil, 0o644))
	require.NoError(t, os.Chmod(old, 0o644))
	j2, err := OpenJournal(old)
	require.NoError(t, err)
	defer j2.Close()
	fi, err := os.Stat(old)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

func TestJournalFirstResultStays(t *testing.T) {
	j, _ := openJournal(t)
	ctx := context.Background()
	require.NoError(t, j.Put(ctx, "k", json.RawMessage(`{"a":1}`)))
	require.NoError(t, j.Put(ctx, "k", json.RawMessage(`{"a":2}`)))
	res, ok, err := j.Get(ctx, "k")
	require.NoError(t, err)
	require.True(t, ok)
	assert.JSONEq(t, `{"a":1}`, string(res))
	_, ok, err = j.Get(ctx, "missing")
	require.NoError(t, err)
	assert.False(t, ok)
}

// failingJournal fails every read.
type failingJournal struct{ Journal }

func (failingJournal) Get(context.Context, string) (json.RawMessage, bool, error) {
	return nil, false, os.ErrPermission
}

func TestJournalThatCannotBeReadIsARetryableFailure(t *testing.T) {
	cs := newChargeServer(t)
	src := open(t, chargeFile(cs.url()), Options{Journal: failingJournal{}})
	_, err := run(t, src, "pay__charge", "k", `{}`, nil)
	ae := appErr(t, err)
	assert.False(t, ae.NonRetryable())
	assert.Contains(t, err.Error(), "reading the journal")
	assert.Zero(t, cs.charges.Load(), "the server is not called when the journal cannot say")
}
