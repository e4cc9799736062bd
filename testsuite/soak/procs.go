package soak

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

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

// Build builds ./cmd/toolgate of the module in the current directory into
// dir and returns the binary's path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "toolgate")
	out, err := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, "./cmd/toolgate").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/toolgate: %w\n%s", err, out)
	}
	return bin, nil
}

// freshDatabases creates n empty databases on the server of base (a
// PostgreSQL URL) and returns their URLs and a function that drops them
// (with the _visibility database the embedded server makes next to each).
func freshDatabases(base string, n int) ([]string, func(), error) {
	admin, err := sql.Open("pgx", base)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", base, err)
	}
	var names, urls []string
	drop := func() {
		for _, name := range names {
			for _, db := range []string{name, name + "_visibility"} {
				_, _ = admin.Exec(`DROP DATABASE IF EXISTS "` + db + `" WITH (FORCE)`)
			}
		}
		_ = admin.Close()
	}
	for range n {
		var b [4]byte
		_, _ = rand.Read(b[:])
		name := "tg_soak_" + hex.EncodeToString(b[:])
		if _, err := admin.ExecContext(context.Background(), `CREATE DATABASE "`+name+`"`); err != nil {
			drop()
			return nil, nil, fmt.Errorf("create database %s: %w", name, err)
		}
		names = append(names, name)
		u, err := url.Parse(base)
		if err != nil {
			drop()
			return nil, nil, err
		}
		u.Path = "/" + name
		urls = append(urls, u.String())
	}
	return urls, drop, nil
}
