package main

import (
	"os"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/testsuite/readme"
)

// readmeRegion is the region of main.go the README shows verbatim, as
// testsuite/readme reads it to check the README against it.
func readmeRegion(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	region, err := readme.Region(src)
	if err != nil || region == string(src) {
		t.Fatalf("main.go's README region (a line // README:begin, then a line // README:end): %v", err)
	}
	return region
}

// The README's region is the whole program a reader needs, and readable:
// the tools, the worker, the client's start, wait, approval bound to the
// args_digest, and result, in at most 50 lines with nothing left out.
func TestREADMERegion(t *testing.T) {
	region := readmeRegion(t)
	if n := strings.Count(region, "\n"); n < 30 || n > 50 {
		t.Errorf("the region has %d lines; the README shows it whole, so keep it to 30-50", n)
	}
	for _, elided := range []string{"…", "...", "// TODO"} {
		if strings.Contains(region, elided) {
			t.Errorf("the region holds %q: the README shows code that compiles, with nothing left out", elided)
		}
	}
	for _, want := range []string{"tool.New(", "Destructive: true", "worker.Start(", "tgclient.New(", "c.Start(", "c.AwaitDecision(",
		"ArgsDigest: it.ArgsDigest", "c.Result("} {
		if !strings.Contains(region, want) {
			t.Errorf("the region has no %q", want)
		}
	}
}
