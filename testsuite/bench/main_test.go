package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// One embedded server and worker for the whole test binary, started on first use.
var (
	envOnce sync.Once
	envVal  *Env
	envErr  error
)

func sharedEnv(tb testing.TB) *Env {
	tb.Helper()
	envOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		envVal, envErr = Start(ctx, Options{})
	})
	if envErr != nil {
		tb.Fatalf("starting the embedded server: %v", envErr)
	}
	return envVal
}

func TestMain(m *testing.M) {
	code := m.Run()
	if envVal != nil {
		envVal.Stop()
	}
	if code != 0 {
		fmt.Fprintln(os.Stderr, "bench: tests failed")
	}
	os.Exit(code)
}
