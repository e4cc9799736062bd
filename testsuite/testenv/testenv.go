// Package testenv holds the helpers toolgate's end-to-end test packages
// (testsuite/e2e, testsuite/ops) share: polling a condition, building the
// toolgate binary, and starting the embedded server with a client of it.
//
// It imports testing, so only test code may import it (never a package the
// toolgate binary links).
package testenv

import (
	"testing"
	"time"
)

// PollInterval is how often Eventually tries its condition again.
const PollInterval = 100 * time.Millisecond

// Eventually polls cond until it returns nil or timeout passes, then fails
// the test with cond's last error: "after <timeout>, still not <what>: <err>".
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, still not %s: %v", timeout, what, err)
		}
		time.Sleep(PollInterval) // polling interval, not an assertion
	}
}
