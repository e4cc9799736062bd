package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/testsuite/testenv"
)

// Without a terminal and without --yes, the demo says a decision is needed
// and how to give it from another shell, and waits; the approve command it
// prints, run as printed, lets the run finish.
func TestDemoWithoutATerminalWaitsForADecisionFromAnotherShell(t *testing.T) {
	t.Parallel()
	bin := toolgateBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, done := startDemo(t, ctx, bin)

	approve := regexp.MustCompile(`toolgate (approve \S+ c-3 --as NAME --address \S+ --namespace \S+)`)
	var printed []string
	testenv.Eventually(t, 60*time.Second, "told how to approve c-3", func() error {
		if m := approve.FindStringSubmatch(out.String()); m != nil {
			printed = strings.Fields(strings.Replace(m[1], "NAME", "erin", 1))
			return nil
		}
		return fmt.Errorf("output so far:\n%s", out.String())
	})
	if !strings.Contains(out.String(), "no terminal and no --yes") {
		t.Errorf("the demo does not say why it waits; output:\n%s", out.String())
	}
	select {
	case err := <-done:
		t.Fatalf("the demo ended before any decision: %v; output:\n%s", err, out.String())
	case <-time.After(time.Second):
	}

	res, code := runCLI(t, waitTimeout, printed...)
	if code != 0 || !strings.Contains(res, "approved c-3 (close_ticket) by erin") {
		t.Fatalf("toolgate %s: exit %d: %s", strings.Join(printed, " "), code, res)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the demo: %v; output:\n%s", err, out.String())
		}
	case <-ctx.Done():
		t.Fatalf("the demo did not finish after the approval; output:\n%s", out.String())
	}
	for _, want := range []string{"c-3  close_ticket     approved", "by erin", `ticket TKT-3 "Cannot log in after password reset" is closed`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output has no %q; output:\n%s", want, out.String())
		}
	}
}

// startDemo starts `toolgate demo` on a fresh data directory with no
// terminal (stdin /dev/null); done receives its exit.
func startDemo(t *testing.T, ctx context.Context, bin string) (*syncBuffer, chan error) {
	t.Helper()
	out := &syncBuffer{}
	demo := exec.CommandContext(ctx, bin, "demo", "--data", t.TempDir())
	demo.Env = childEnv()
	demo.Stdout, demo.Stderr = out, out
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- demo.Wait() }()
	return out, done
}
