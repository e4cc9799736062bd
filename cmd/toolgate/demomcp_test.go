package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each `demo --mcp` starts from the sample text: a missing file is made, a
// file a demo's write left is reset, and a file of someone else's is left
// alone (the demo stops instead of rewriting it).
func TestResetDemoMCPFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), demoMCPFile)
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	if made, err := resetDemoMCPFile(path); err != nil || !made || read() != demoMCPContent {
		t.Errorf("a missing file: made %v, %v, %q; want it made with the sample text", made, err, read())
	}
	write(demoMCPWrite("demo-mcp-1796186420837791446"))
	if made, err := resetDemoMCPFile(path); err != nil || made || read() != demoMCPContent {
		t.Errorf("a demo's write: made %v, %v, %q; want the sample text again", made, err, read())
	}
	if made, err := resetDemoMCPFile(path); err != nil || made || read() != demoMCPContent {
		t.Errorf("the sample text: made %v, %v, %q; want it kept", made, err, read())
	}
	for _, own := range []string{
		"my own notes\n",
		demoMCPWrite("demo-mcp-1") + "and a line of mine\n",
		demoMCPWrite("someone else"),
		strings.TrimSuffix(demoMCPContent, "\n"),
	} {
		write(own)
		_, err := resetDemoMCPFile(path)
		if err == nil || !strings.Contains(err.Error(), "holds text the demo did not write") {
			t.Errorf("a file holding %q: %v, want a refusal", own, err)
		}
		if got := read(); got != own {
			t.Errorf("a file holding %q was rewritten: %q", own, got)
		}
	}
}
