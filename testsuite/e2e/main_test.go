// Package e2e is toolgate's end-to-end suite: every test runs against the real
// embedded Temporal server (devserver, SQLite on disk), with real workers —
// in this process, or the toolgate binary as a subprocess that a test may
// kill -9 — and reads the demo desk's SQLite file to see what really happened.
package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/toolgate/toolgate/testsuite/testenv"
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

// buildToolgate builds the binary into dir and records how long it took.
func buildToolgate(dir string) (string, error) {
	began := time.Now()
	bin, err := testenv.BuildToolgate(dir)
	if err == nil {
		buildTook = time.Since(began)
	}
	return bin, err
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
