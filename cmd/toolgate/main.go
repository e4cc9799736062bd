// Command toolgate is toolgate's one binary: an embedded Temporal server with a
// worker (dev, demo), a worker for any Temporal cluster (worker), the
// operator's client (run, status, next, trace, approve, reject, pending,
// replay), its web approvals inbox (inbox) and a review of an --mcp file's
// tools (mcp list).
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
	"syscall"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/toolgate/toolgate/workflows"
)

const usage = `toolgate — a durable, safe tool executor for AI agents, on Temporal.

Usage:
  toolgate demo   [--yes] [--data DIR] [--planner support|openai] [--policy FILE] [--mcp FILE [--share DIR]]
  toolgate dev    [--data DIR] [--db postgres://USER@HOST:PORT/DB] [--no-worker] [--desk-db postgres://…]
                  [--address HOST:PORT] [--ui-address HOST:PORT] [--namespace NS] [--allow-auto-approve]
                  [--metrics-address HOST:PORT] [--otlp-endpoint HOST:PORT [--otlp-insecure]] [--http-api] [--policy FILE]
                  [--mcp FILE] [--inbox-address HOST:PORT] [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]
  toolgate inbox  [--listen HOST:PORT] [--address HOST:PORT] [--namespace NS] [--tls-cert FILE --tls-key FILE]
                  [--insecure] [--host NAME,...] [--task-queue Q]... [--query-timeout 2s]
  toolgate worker [--address HOST:PORT] [--namespace NS] [--task-queue Q] [--data DIR] [--allow-auto-approve]
                  [--search-attributes] [--desk-db postgres://…] [--metrics-address HOST:PORT]
                  [--otlp-endpoint HOST:PORT [--otlp-insecure]] [--policy FILE] [--mcp FILE]
  toolgate mcp list --mcp FILE [--json]
  toolgate run    --id ID (--plan FILE | --goal TEXT) [--planner support|openai] [--approval human|deny|always_approve] [--wait]
                  [--as NAME --key FILE]
  toolgate status|next|trace ID [--json]
  toolgate approve ID CALL_ID... [--as NAME [--key FILE]] [--note TEXT] [--args JSON] [--data JSON]
  toolgate reject  ID CALL_ID... --reason TEXT [--as NAME [--key FILE]]
  toolgate grant   ID TOOL --as NAME --key FILE [--when EXPR] [--uses N] [--for DURATION]
  toolgate revoke  ID GRANT_ID --as NAME --key FILE
  toolgate pending [--json] [--page-size N] [--page TOKEN | --all] [--tool NAME] [--task-queue Q]... [--query-timeout 2s]
  toolgate replay FILE...
  toolgate audit  HISTORY.json... [--policy FILE]
  toolgate keys new NAME [--dir DIR]
  toolgate keys tls DIR [--host H]... [--client-name CN] [--valid-for DURATION]

The benchmark is a command of its own (BENCHMARKS.md):
  go run ./cmd/toolgate-bench [--calls N] [--rounds R] [--session 1000[,10000:local]] [--json FILE]

--address defaults to $TEMPORAL_ADDRESS or 127.0.0.1:7233, --namespace to
$TEMPORAL_NAMESPACE or default, --data DIR to .toolgate/ under the current directory.
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
		"approve": c.approve, "reject": c.reject, "pending": c.pending, "replay": c.replay,
		"keys": c.keys, "grant": c.grant, "revoke": c.revoke, "audit": c.audit, "mcp": c.mcp, "inbox": c.inboxCmd,
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

// conn holds the connection flags shared by the client commands.
type conn struct {
	address, namespace string
}

func (c *cli) connFlags(fs *flag.FlagSet) *conn {
	cn := &conn{}
	fs.StringVar(&cn.address, "address", envOr("TEMPORAL_ADDRESS", "127.0.0.1:7233"), "Temporal frontend host:port")
	fs.StringVar(&cn.namespace, "namespace", envOr("TEMPORAL_NAMESPACE", "default"), "Temporal namespace")
	return cn
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

// dial connects to the Temporal server, saying what to do when there is none.
func (c *cli) dial(ctx context.Context, cn *conn) (client.Client, error) {
	return c.dialWith(ctx, cn, nil)
}

// dialWith is dial, with the SDK's metrics (and those of the runs of a worker
// on this client) going to metrics; nil: no metrics.
func (c *cli) dialWith(ctx context.Context, cn *conn, metrics client.MetricsHandler) (client.Client, error) {
	cl, err := client.DialContext(ctx, client.Options{HostPort: cn.address, Namespace: cn.namespace, Logger: c.quietLogger(), MetricsHandler: metrics})
	if err != nil {
		return nil, fmt.Errorf("no Temporal server answers at %s (namespace %s): start one with `toolgate dev`, or point --address / TEMPORAL_ADDRESS at yours: %w",
			cn.address, cn.namespace, err)
	}
	return cl, nil
}

// taskQueueFlag adds --task-queue.
func taskQueueFlag(fs *flag.FlagSet) *string {
	return fs.String("task-queue", workflows.TaskQueue, "task queue of toolgate workers")
}
