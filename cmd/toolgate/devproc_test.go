package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startDev runs `toolgate dev` with args (after --data and --address
// 127.0.0.1:0) in this process until the test ends, and returns its
// address and what it printed up to its "ready" line.
func startDev(t *testing.T, ctx context.Context, args ...string) (address, out string) {
	t.Helper()
	devCtx, stopDev := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(devCtx, append([]string{"dev", "--data", t.TempDir(), "--address", "127.0.0.1:0"}, args...), strings.NewReader(""), pw, io.Discard)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	t.Cleanup(func() {
		stopDev()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("dev did not stop")
		}
	})
	lines := bufio.NewScanner(pr)
	for address == "" && lines.Scan() {
		out += lines.Text() + "\n"
		if a, ok := strings.CutPrefix(lines.Text(), "ready "); ok {
			address = a
		}
	}
	require.NotEmpty(t, address, "no ready line in:\n%s", out)
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return address, out
}
