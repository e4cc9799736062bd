// Command toolgate is toolgate's one binary: an embedded Temporal server with a
// worker (dev, demo), a worker for any Temporal cluster (worker), the
// operator's client (run, status, next, trace, approve, reject, pending,
// replay), its web approvals inbox (inbox), its AG-UI endpoint (agui), a review of an --mcp file's
// tools (mcp list), the worker's gated tools served to MCP clients (mcp
// serve, mcp token new), and toolgate as a Nexus service (dev
// --nexus-endpoint, worker --nexus, nexus endpoint create, nexus sign-start).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/workflows"
)

// exitError carries a process exit code with its message.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	if err == nil {
		return
	}
	if !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "toolgate:", multiLine(err.Error())) // errors may quote a run's text: escape.go
	}
	var ee *exitError
	if errors.As(err, &ee) {
		os.Exit(ee.code)
	}
	os.Exit(1)
}

// cli is one invocation's streams.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// stopped is the flag set whose parsing stopped, at -h/--help or at a
	// bad flag, and its command's name (c.flags sets it).
	stopped *helped
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	switch {
	case len(args) == 0 || isHelpArg(args[0]) && len(args) == 1:
		fmt.Fprint(stdout, groupedHelp())
		return nil
	case isHelpArg(args[0]):
		return c.help(ctx, args[1:]) // toolgate help COMMAND...
	case len(args) > 1 && isHelpArg(args[1]) && isGroup(args[0]):
		return c.help(ctx, args[:1]) // toolgate keys --help
	}
	return c.dispatch(ctx, args)
}

// commands are toolgate's commands by their first word.
func (c *cli) commands() map[string]func(context.Context, []string) error {
	return map[string]func(context.Context, []string) error{
		"demo": c.demo, "dev": c.dev, "worker": c.worker,
		"run": c.start, "status": c.status, "next": c.next, "trace": c.trace,
		"approve": c.approve, "reject": c.reject, "respond": c.respond,
		"steps": c.steps, "rewind": c.rewind, "fork": c.fork,
		"pending": c.pending, "replay": c.replay,
		"keys": c.keys, "grant": c.grant, "revoke": c.revoke, "audit": c.audit, "mcp": c.mcp, "inbox": c.inboxCmd,
		"codec-server": c.codecServer, "agui": c.aguiCmd, "notify": c.notify,
		"pause": c.pauseCmd(true), "unpause": c.pauseCmd(false), "guards": c.guards, "nexus": c.nexus,
		"versions": c.versions,
	}
}

// dispatch runs the command args name. A command whose flags stop at
// -h/--help has its help printed (printHelp, with the flag set it built); a
// bad flag's error names `toolgate help COMMAND`.
func (c *cli) dispatch(ctx context.Context, args []string) error {
	cmd, ok := c.commands()[args[0]]
	if !ok {
		return fmt.Errorf("unknown command %q (see toolgate --help)", args[0])
	}
	err := cmd(ctx, args[1:])
	if s := c.stopped; s != nil && err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(c.stdout, s.name, s.fs)
			return nil
		}
		return fmt.Errorf("%w (toolgate help %s lists its flags)", err, s.name)
	}
	return err
}

// flags returns command name's flag set, which reports its errors instead
// of exiting, and stops at -h/--help for dispatch to print the command's help.
func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("toolgate "+name, flag.ContinueOnError)
	// The flag package prints a bad flag's error, then calls Usage: the
	// error is printed once, by main, and help goes to stdout (dispatch).
	fs.SetOutput(io.Discard)
	fs.Usage = func() { c.stopped = &helped{name: name, fs: fs} }
	return fs
}

// parse parses flags given before, between or after positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// connFlags adds the connection flags (package connect) to fs: where
// Temporal is, how to authenticate, and the encryption key file.
func (c *cli) connFlags(fs *flag.FlagSet) *connect.Settings {
	s := &connect.Settings{}
	s.AddFlags(fs)
	return s
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// dial connects to the Temporal server of s, saying what to do when that fails.
func (c *cli) dial(ctx context.Context, s *connect.Settings) (client.Client, *connect.Conn, error) {
	return c.dialWith(ctx, s, nil)
}

// dialWith is dial, with the SDK's metrics (and those of the runs of a worker
// on this client) going to metrics; nil: no metrics.
func (c *cli) dialWith(ctx context.Context, s *connect.Settings, metrics client.MetricsHandler) (client.Client, *connect.Conn, error) {
	return connect.Dial(ctx, *s, func(o *client.Options) {
		o.Logger, o.MetricsHandler = c.quietLogger(), metrics
	})
}

// listFlag is a flag given several times, or once with comma-separated
// values (--host, --origin, --namespace).
type listFlag []string

func (h *listFlag) String() string { return strings.Join(*h, ",") }

func (h *listFlag) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*h = append(*h, part)
		}
	}
	return nil
}

// taskQueueFlag adds --task-queue.
func taskQueueFlag(fs *flag.FlagSet) *string {
	return fs.String("task-queue", workflows.TaskQueue, "task queue of toolgate workers")
}
