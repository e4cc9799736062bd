package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// The SDK's poll warning for a worker that stops is dropped; the same
// warning with another error, and every other warning, is written.
func TestQuietLoggerDropsOnlyTheStoppingPoll(t *testing.T) {
	var buf bytes.Buffer
	c := &cli{stderr: &buf}
	l := c.quietLogger()
	l.Warn("Failed to poll for task.", "Namespace", "default", "Error", errors.New("worker stopping"))
	l.Info("an info line")
	if buf.Len() != 0 {
		t.Fatalf("written: %q, want nothing", buf.String())
	}
	l.Warn("Failed to poll for task.", "Error", errors.New("connection refused"))
	l.Warn("Workflow panic", "Error", errors.New("worker stopping"))
	for _, want := range []string{`msg="Failed to poll for task." Error="connection refused"`, `msg="Workflow panic" Error="worker stopping"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the log %q has no %q", buf.String(), want)
		}
	}
}
