package main

import (
	"strings"
	"testing"
)

// devWorkerToken is the worker token file `toolgate dev` named in its
// output (out, as startDev returns it): what a worker of another process
// sends (--token-file) to poll the dev server's task queues.
func devWorkerToken(t *testing.T, out string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, "worker token in "); ok {
			if file, _, ok := strings.Cut(rest, " "); ok {
				return file
			}
		}
	}
	t.Fatalf("dev named no worker token file in:\n%s", out)
	return ""
}
