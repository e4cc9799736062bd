package main

import (
	"context"
	"log/slog"
	"strings"

	sdklog "go.temporal.io/sdk/log"
)

// quietLogger keeps the SDK's own logs to warnings and errors on stderr,
// without the one warning a worker that stops writes by a race and that
// says nothing wrong (stoppingPoll).
func (c *cli) quietLogger() sdklog.Logger {
	h := slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
	return sdklog.NewStructuredLogger(slog.New(dropStoppingPolls{h}))
}

// dropStoppingPolls is a slog.Handler that drops the SDK's "Failed to poll
// for task." when its error is the worker's own "worker stopping": a poll
// that ends because this process stops its worker (a demo at its end, a
// Ctrl-C) is no failure, and the SDK (v1.50.0, internal_worker_base.go)
// checks its stop channel before that poll ends, so it logs it as one now
// and then. Every other record, that warning with any other error among
// them, goes on to the handler it wraps.
type dropStoppingPolls struct{ slog.Handler }

func (h dropStoppingPolls) Handle(ctx context.Context, r slog.Record) error {
	if stoppingPoll(r) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h dropStoppingPolls) WithAttrs(as []slog.Attr) slog.Handler {
	return dropStoppingPolls{h.Handler.WithAttrs(as)}
}

func (h dropStoppingPolls) WithGroup(name string) slog.Handler {
	return dropStoppingPolls{h.Handler.WithGroup(name)}
}

// stoppingPoll reports whether r is the SDK's poll warning for a worker
// that is stopping.
func stoppingPoll(r slog.Record) bool {
	if r.Message != "Failed to poll for task." {
		return false
	}
	stopping := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "Error" && strings.Contains(a.Value.String(), "worker stopping") {
			stopping = true
		}
		return !stopping
	})
	return stopping
}
