package main

import (
	"os"
	"strings"
	"testing"
)

// The markers of the README's region.
const (
	regionBegin = "// README:begin"
	regionEnd   = "// README:end"
)

// readmeRegion is the region of main.go the README shows verbatim: the
// lines strictly between the line regionBegin and the line regionEnd, each
// marker there exactly once.
func readmeRegion(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	begin, end := -1, -1
	for i, l := range lines {
		switch {
		case l == regionBegin && begin < 0:
			begin = i
		case l == regionEnd && end < 0:
			end = i
		case strings.HasPrefix(strings.TrimSpace(l), "// README:"):
			t.Fatalf("main.go:%d: %q: the markers are %q and %q, each once, on lines of their own", i+1, l, regionBegin, regionEnd)
		}
	}
	if begin < 0 || end < begin {
		t.Fatalf("main.go has no region: want a line %q, then a line %q", regionBegin, regionEnd)
	}
	return strings.Join(lines[begin+1:end], "\n") + "\n"
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
