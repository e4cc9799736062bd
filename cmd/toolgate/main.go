// Command toolgate is toolgate's one binary: an embedded Temporal server with a
// worker (dev, demo), a worker for any Temporal cluster (worker), the
// operator's client (run, status, next, trace, approve, reject, pending,
// replay), its web approvals inbox (inbox), its AG-UI endpoint (agui), a review of an --mcp file's
// tools (mcp list), and the worker's gated tools served to MCP clients (mcp
// serve, mcp token new).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/workflows"
)

const usage = `toolgate — a durable, safe tool executor for AI agents, on Temporal.

Usage:
  toolgate demo   [--yes] [--data DIR] [--planner support|openai] [--policy FILE] [--notify FILE] [--mcp FILE [--share DIR]]
  toolgate dev    [--data DIR] [--db postgres://USER@HOST:PORT/DB] [--no-worker] [--desk-db postgres://…]
                  [--address HOST:PORT] [--ui-address HOST:PORT] [--namespace NS] [--allow-auto-approve]
                  [--metrics-address HOST:PORT] [--otlp-endpoint HOST:PORT [--otlp-insecure]] [--http-api] [--policy FILE]
                  [--mcp FILE] [--notify FILE [--via-key FILE]] [--inbox-address HOST:PORT] [--encryption-key-file FILE]
                  [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]
                  [--mcp-address HOST:PORT --mcp-tokens FILE [--mcp-wait 3m]]
                  [--agui-address HOST:PORT [--agui-origin URL]... [--agui-planner support|openai] [--agui-tokens FILE]]
  toolgate inbox  [--listen HOST:PORT] [CONNECTION] [--listen-tls-cert FILE --listen-tls-key FILE]
                  [--insecure] [--host NAME,...] [--task-queue Q]... [--query-timeout 2s] [--notify FILE [--policy FILE [--via-key FILE]] [--replies-only]]
  toolgate agui   [--listen HOST:PORT] [CONNECTION] [--task-queue Q] [--agui-planner support|openai]
                  [--agui-origin URL]... [--host H]... [--listen-tls-cert FILE --listen-tls-key FILE | --insecure]
                  [--approval-timeout D] [--idle-timeout D] [--agui-tokens FILE] [--policy FILE]
  toolgate worker [CONNECTION] [--task-queue Q] [--data DIR] [--allow-auto-approve]
                  [--search-attributes] [--desk-db postgres://…] [--metrics-address HOST:PORT]
                  [--otlp-endpoint HOST:PORT [--otlp-insecure]] [--policy FILE] [--mcp FILE] [--notify FILE]
  toolgate mcp list --mcp FILE [--json]
  toolgate mcp serve (--listen HOST:PORT --tokens FILE | --stdio [--as NAME [--key FILE]] [--run NAME]) [--mcp-wait 3m]
                  [--listen-tls-cert FILE --listen-tls-key FILE | --insecure] [--host H]... [--origin O]...
                  [--approve-by-elicitation] [CONNECTION] [--task-queue Q] [--data DIR] [--policy FILE] [--mcp FILE] [worker's flags]
  toolgate mcp token new NAME --tokens FILE [--key FILE]
  toolgate run    --id ID (--plan FILE | --goal TEXT) [--planner support|openai] [--approval human|deny|always_approve] [--wait]
                  [--as NAME --key FILE] [CONNECTION]
  toolgate status|next|trace ID [--json] [CONNECTION]
  toolgate approve ID CALL_ID... [--as NAME [--key FILE]] [--note TEXT] [--args JSON] [--data JSON] [CONNECTION]
  toolgate reject  ID CALL_ID... --reason TEXT [--cancel] [--as NAME [--key FILE]] [CONNECTION]
  toolgate respond ID CALL_ID --response JSON [--note TEXT] [--as NAME [--key FILE]] [CONNECTION]
  toolgate steps   ID [--json] [CONNECTION]          every call of the run's chain, its status, approver and rewind point
  toolgate rewind  ID --to CALL_ID --dry-run [--json] [CONNECTION]      what a rewind would do, and its digest
  toolgate rewind  ID --to CALL_ID --expect DIGEST [--as NAME [--key FILE]] [CONNECTION]
  toolgate fork    ID --at CALL_ID --id NEW_ID [--args JSON] [--as NAME [--key FILE]] [CONNECTION]
  toolgate grant   ID TOOL --as NAME --key FILE [--when EXPR] [--uses N] [--for DURATION] [CONNECTION]
  toolgate revoke  ID GRANT_ID --as NAME --key FILE [CONNECTION]
  toolgate pending [--json] [--page-size N] [--page TOKEN | --all] [--tool NAME] [--task-queue Q]... [--query-timeout 2s] [CONNECTION]
  toolgate replay FILE... [--encryption-key-file FILE]
  toolgate audit  HISTORY.json... [--policy FILE] [--encryption-key-file FILE]
  toolgate keys new NAME [--dir DIR]
  toolgate keys encryption FILE
  toolgate keys tls DIR [--host H]...
  toolgate notify test FILE                         one test message to every target of a notify file
  toolgate codec-server [--listen HOST:PORT] --encryption-key-file FILE [--origin URL]... [--auth-file FILE]
                  [--namespace NS]... [--tls-cert FILE --tls-key FILE] [--insecure]

CONNECTION (as the temporal CLI: a profile of its temporal.toml, then TEMPORAL_*
variables, then these flags, each over the one before):
  [--address HOST:PORT] [--namespace NS] [--profile NAME] [--config-file FILE]
  [--api-key KEY] [--tls[=false]] [--tls-cert FILE --tls-key FILE] [--tls-ca FILE]
  [--tls-server-name NAME] [--encryption-key-file FILE]

The benchmark is a command of its own (BENCHMARKS.md):
  go run ./cmd/toolgate-bench [--calls N] [--rounds R] [--session 1000[,10000:local]] [--json FILE]

--address defaults to the profile's, $TEMPORAL_ADDRESS or 127.0.0.1:7233, --namespace
to the profile's, $TEMPORAL_NAMESPACE or default, --data DIR to .toolgate/ under the
current directory.
`

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
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	cmds := map[string]func(context.Context, []string) error{
		"demo": c.demo, "dev": c.dev, "worker": c.worker,
		"run": c.start, "status": c.status, "next": c.next, "trace": c.trace,
		"approve": c.approve, "reject": c.reject, "respond": c.respond,
		"steps": c.steps, "rewind": c.rewind, "fork": c.fork,
		"pending": c.pending, "replay": c.replay,
		"keys": c.keys, "grant": c.grant, "revoke": c.revoke, "audit": c.audit, "mcp": c.mcp, "inbox": c.inboxCmd,
		"codec-server": c.codecServer, "agui": c.aguiCmd, "notify": c.notify,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		return fmt.Errorf("unknown command %q (see toolgate --help)", args[0])
	}
	return cmd(ctx, args[1:])
}

// flags returns a flag set that reports its errors instead of exiting.
func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("toolgate "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
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

// quietLogger keeps the SDK's own logs to warnings and errors on stderr.
func (c *cli) quietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
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
