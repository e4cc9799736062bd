package devserver

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// slogLogger adapts the Temporal server's logger interface to log/slog.
//
// The server is very chatty at info level, so only warnings and errors are
// forwarded, unless the slog handler is enabled for debug, in which case
// everything is forwarded.
//
// Fatal and Panic log at error level and then panic. The server calls Fatal
// where it cannot continue (a listener that cannot bind, for example) and
// expects the process to end there; returning would only move the failure to
// a nil-pointer dereference further on. A panic raised while Start builds or
// starts the server is recovered by Start and returned as an error.
//
// After Stop the logger is muted: the server leaves some goroutines behind
// (see Server.Stop), and what they log is noise. A Fatal or Panic from such a
// goroutine ends that goroutine (runtime.Goexit) instead of the process.
type slogLogger struct {
	log   *slog.Logger
	min   slog.Level
	muted *atomic.Bool // shared by the loggers derived with With
}

var (
	_ log.Logger     = slogLogger{}
	_ log.WithLogger = slogLogger{}
)

func newServerLogger(l *slog.Logger) slogLogger {
	if l == nil {
		return slogLogger{log: slog.New(slog.DiscardHandler), min: slog.LevelError + 100, muted: new(atomic.Bool)}
	}
	min := slog.LevelWarn
	if l.Enabled(context.Background(), slog.LevelDebug) {
		min = slog.LevelDebug
	}
	return slogLogger{log: l, min: min, muted: new(atomic.Bool)}
}

func (s slogLogger) mute() {
	if s.muted != nil {
		s.muted.Store(true)
	}
}

func (s slogLogger) Debug(msg string, tags ...tag.Tag)  { s.emit(slog.LevelDebug, msg, tags) }
func (s slogLogger) Info(msg string, tags ...tag.Tag)   { s.emit(slog.LevelInfo, msg, tags) }
func (s slogLogger) Warn(msg string, tags ...tag.Tag)   { s.emit(slog.LevelWarn, msg, tags) }
func (s slogLogger) Error(msg string, tags ...tag.Tag)  { s.emit(slog.LevelError, msg, tags) }
func (s slogLogger) DPanic(msg string, tags ...tag.Tag) { s.emit(slog.LevelError, msg, tags) }

func (s slogLogger) Panic(msg string, tags ...tag.Tag) { s.fatal(msg, tags) }
func (s slogLogger) Fatal(msg string, tags ...tag.Tag) { s.fatal(msg, tags) }

func (s slogLogger) fatal(msg string, tags []tag.Tag) {
	if s.muted.Load() {
		runtime.Goexit()
	}
	s.emit(slog.LevelError, msg, tags)
	panic(serverPanic(msg, tags))
}

func (s slogLogger) With(tags ...tag.Tag) log.Logger {
	if len(tags) == 0 {
		return s
	}
	args := make([]any, 0, len(tags))
	for _, a := range tagsToAttrs(tags) {
		args = append(args, a)
	}
	return slogLogger{log: s.log.With(args...), min: s.min, muted: s.muted}
}

func (s slogLogger) emit(level slog.Level, msg string, tags []tag.Tag) {
	if level < s.min || s.muted.Load() || !s.log.Enabled(context.Background(), level) {
		return
	}
	s.log.LogAttrs(context.Background(), level, msg, tagsToAttrs(tags)...)
}

func tagsToAttrs(tags []tag.Tag) []slog.Attr {
	attrs := make([]slog.Attr, 0, len(tags))
	for _, t := range tags {
		if t == nil {
			continue
		}
		attrs = append(attrs, slog.Any(t.Key(), t.Value()))
	}
	return attrs
}

// fatalError is the value the adapter panics with on Fatal and Panic.
type fatalError struct{ msg string }

func (e *fatalError) Error() string { return e.msg }

func serverPanic(msg string, tags []tag.Tag) error {
	for _, t := range tags {
		if t == nil {
			continue
		}
		msg += fmt.Sprintf(" %s=%v", t.Key(), t.Value())
	}
	return &fatalError{msg: "temporal server: " + msg}
}
