// Package e2e is toolgate's end-to-end suite: every test runs against the real
// embedded Temporal server (devserver, SQLite on disk), with real workers —
// in this process, or the toolgate binary as a subprocess that a test may
// kill -9 — and reads the demo desk's SQLite file to see what really happened.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The toolgate binary, built once by TestMain. The build runs in the
// background while the in-process tests run; tests that need the binary call
// toolgateBinary, which waits for it.
var (
	binPath  string
	binErr   error
	binReady = make(chan struct{})
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "toolgate-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	go func() {
		defer close(binReady)
		binPath, binErr = buildToolgate(dir)
	}()
	code := m.Run()
	<-binReady // never remove the directory under a running build
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// buildToolgate builds ./cmd/toolgate of this module into dir.
func buildToolgate(dir string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("go env GOMOD: not inside a module")
	}
	bin := filepath.Join(dir, "toolgate")
	// -s -w: no symbol tables or DWARF, a much smaller binary that links faster.
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags=-s -w", "-o", bin, "./cmd/toolgate")
	cmd.Dir = filepath.Dir(gomod)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	began := time.Now()
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/toolgate: %w\n%s", err, buf.Bytes())
	}
	buildTook = time.Since(began)
	return bin, nil
}

// buildTook is how long building the binary took (logged by the first test
// that needs it).
var buildTook time.Duration

// toolgateBinary waits for TestMain's build and returns the binary's path.
func toolgateBinary(t *testing.T) string {
	t.Helper()
	began := time.Now()
	select {
	case <-binReady:
	case <-time.After(10 * time.Minute):
		t.Fatal("timed out waiting for the toolgate binary to build")
	}
	if binErr != nil {
		t.Fatalf("building the toolgate binary: %v", binErr)
	}
	if waited := time.Since(began); waited > time.Second {
		t.Logf("waited %v for the toolgate binary (build took %v)", waited.Round(time.Millisecond), buildTook.Round(time.Millisecond))
	}
	return binPath
}
