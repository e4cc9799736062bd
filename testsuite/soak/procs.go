package soak

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/pgtest"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// proc is a toolgate subprocess; its output is kept for the report.
type proc struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startProc starts bin with args (the environment without TOOLGATE_ and
// TEMPORAL_ variables).
func startProc(bin string, args ...string) (*proc, error) {
	p := &proc{cmd: exec.Command(bin, args...), out: &lockedBuffer{}, done: make(chan struct{})}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TOOLGATE_") && !strings.HasPrefix(kv, "TEMPORAL_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting toolgate %s: %w", args[0], err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// kill sends SIGKILL and waits for the exit.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

var readyLine = regexp.MustCompile(`(?m)^ready (\S+)$`)

// awaitReady waits for `toolgate dev`'s "ready ADDRESS" line.
func (p *proc) awaitReady(timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if m := readyLine.FindStringSubmatch(p.out.String()); m != nil {
			return m[1], nil
		}
		select {
		case <-p.done:
			return "", fmt.Errorf("toolgate dev exited:\n%s", p.out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("toolgate dev not ready after %v:\n%s", timeout, p.out.String())
}

// freshDatabases creates n empty databases on the server of base (a
// PostgreSQL URL) and returns their URLs and a function that drops them.
func freshDatabases(base string, n int) ([]string, func(), error) {
	var urls []string
	var drops []func()
	drop := func() {
		for _, d := range drops {
			d()
		}
	}
	for range n {
		u, d, err := pgtest.Create(base, "soak")
		if err != nil {
			drop()
			return nil, nil, err
		}
		urls, drops = append(urls, u), append(drops, d)
	}
	return urls, drop, nil
}
