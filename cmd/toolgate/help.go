package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/toolgate/toolgate/connect"
)

// command is one command's help: `toolgate --help` lists its name and
// summary under its group; `toolgate help NAME` (or `toolgate NAME --help`)
// prints the summary, the usage, the examples and then every flag of the
// flag set the command itself builds (c.flags records it when parsing stops
// at --help), so the flags listed are always the flags taken.
type command struct {
	name     string // as typed: "approve", "mcp serve"
	group    string
	summary  string   // one line, lower case, no full stop
	usage    []string // usage lines (continued ones indented)
	examples []string // runnable command lines
}

// Groups of `toolgate --help`, in order.
const (
	groupRun     = "Run and decide"
	groupServe   = "Serve"
	groupOperate = "Operate"
	groupKeys    = "Keys"
)

var commandGroups = []string{groupRun, groupServe, groupOperate, groupKeys}

// commandHelp is every command's help, in the order `toolgate --help` lists
// them within their group. TestHelpCoversEveryCommand holds it to the
// dispatch table of (*cli).commands.
var commandHelp = []command{
	{name: "demo", group: groupRun, summary: "everything in one process: a server, a worker and a run that waits for you",
		usage: []string{"toolgate demo [--yes] [--data DIR] [--planner support|openai] [--policy FILE] [--notify FILE]",
			"              [--mcp FILE [--share DIR]]"},
		examples: []string{"toolgate demo", "toolgate demo --yes --policy examples/policy.yaml"}},
	{name: "run", group: groupRun, summary: "start a run from a goal or a RunInput file; --wait follows it to its end",
		usage: []string{"toolgate run --id ID (--plan FILE | --goal TEXT) [--planner support|openai] [--wait]",
			"             [--approval human|deny|always_approve] [--as NAME --key FILE] [--task-queue Q]",
			"             [CONNECTION]",
			"with --wait, exits 0 completed, 1 failed, 2 blocked, 3 completed but none of its calls ran"},
		examples: []string{`toolgate run --id ticket-42 --goal "find the login ticket and close it"`,
			"toolgate run --id plan-1 --plan examples/seed.json --wait"}},
	{name: "status", group: groupRun, summary: "a run's status, the calls it waits on (with args_digest), grants and memo",
		usage: []string{"toolgate status ID [--json] [CONNECTION]"}, examples: []string{"toolgate status ticket-42", "toolgate status ticket-42 --json"}},
	{name: "next", group: groupRun, summary: "what a run waits to do next (gate:close_ticket)",
		usage: []string{"toolgate next ID [--json] [CONNECTION]"}, examples: []string{"toolgate next ticket-42"}},
	{name: "trace", group: groupRun, summary: "a run's append-only trace: every call, decision and outcome",
		usage: []string{"toolgate trace ID [--json] [CONNECTION]"}, examples: []string{"toolgate trace ticket-42", "toolgate trace ticket-42 --json"}},
	{name: "pending", group: groupRun, summary: "the calls waiting for a decision, across runs, a page of runs at a time",
		usage: []string{"toolgate pending [--json] [--page-size N] [--page TOKEN | --all] [--tool NAME] [--task-queue Q]...",
			"                 [--query-timeout 2s] [CONNECTION]"},
		examples: []string{"toolgate pending", "toolgate pending --tool close_ticket --all --json"}},
	{name: "approve", group: groupRun, summary: "approve calls waiting at the gate (--args: with arguments you changed)",
		usage: []string{"toolgate approve ID CALL_ID... [--as NAME [--key FILE]] [--note TEXT] [--args JSON] [--data JSON]",
			"                 [CONNECTION]"},
		examples: []string{`toolgate approve ticket-42 c-3 --as alice --note "checked with the customer"`,
			"toolgate approve ticket-42 c-3 --as alice --key .toolgate/keys/alice.key"}},
	{name: "reject", group: groupRun, summary: "refuse waiting calls with a reason the planner is told (--cancel: cancel)",
		usage: []string{"toolgate reject ID CALL_ID... --reason TEXT [--cancel] [--as NAME [--key FILE]] [CONNECTION]"},
		examples: []string{`toolgate reject ticket-42 c-3 --as bob --reason "wrong ticket"`,
			`toolgate reject ticket-42 c-3 --as bob --reason "the user left" --cancel`}},
	{name: "respond", group: groupRun, summary: "answer a waiting call in the tool's place: the tool does not run",
		usage:    []string{"toolgate respond ID CALL_ID --response JSON [--note TEXT] [--as NAME [--key FILE]] [CONNECTION]"},
		examples: []string{`toolgate respond ticket-42 c-4 --as alice --response '{"rows":[]}'`}},

	{name: "dev", group: groupServe, summary: "the embedded Temporal server and a worker (inbox, UI, MCP, AG-UI, Nexus)",
		usage: []string{"toolgate dev [--data DIR] [--db postgres://…] [--address HOST:PORT] [--ui-address HOST:PORT]",
			"             [--no-worker] [--inbox-address HOST:PORT] [--mcp-address HOST:PORT --mcp-tokens FILE]",
			"             [--agui-address HOST:PORT] [--nexus-endpoint NAME] [--policy FILE] [--mcp FILE]",
			"             [--notify FILE] [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]",
			"             [--tls-worker-name CN] [--encryption-key-file FILE] … (every flag below)",
			"A client with no credential has a person's role (start, signal, update, query, read runs);",
			"workers use the worker token dev writes to DATA/auth/worker.token (--token-file)."},
		examples: []string{"toolgate dev --ui-address 127.0.0.1:8233",
			"toolgate dev --policy examples/policy.yaml --inbox-address 127.0.0.1:8080",
			"toolgate dev --nexus-endpoint toolgate"}},
	{name: "worker", group: groupServe, summary: "a worker for any Temporal server: the demo desk's and --mcp tools, gated",
		usage: []string{"toolgate worker [CONNECTION] [--task-queue Q] [--data DIR] [--search-attributes[=auto|true|false]]",
			"                [--policy FILE] [--mcp FILE] [--notify FILE] [--desk-db postgres://…]",
			"                [--metrics-address HOST:PORT] [--otlp-endpoint HOST:PORT [--otlp-insecure]]",
			"                [--nexus [--nexus-task-queue Q]] [--worker-key FILE]",
			"Every worker of a task queue signs and checks tools' permits with the same worker key:",
			"DATA/worker.key by default (made if missing), or --worker-key FILE."},
		examples: []string{"toolgate worker --address temporal.example:7233 --namespace agents",
			"toolgate worker --profile prod --policy policy.yaml --metrics-address 127.0.0.1:9090",
			"toolgate worker --address temporal.example:7233 --namespace agents --nexus",
			"toolgate worker --address 127.0.0.1:7233 --token-file .toolgate/auth/worker.token"}},
	{name: "inbox", group: groupServe, summary: "the web approvals inbox for the runs on any Temporal server",
		usage: []string{"toolgate inbox [--listen HOST:PORT] [CONNECTION] [--listen-tls-cert FILE --listen-tls-key FILE |",
			"               --insecure] [--host NAME,...] [--task-queue Q]... [--query-timeout 2s]",
			"               [--notify FILE [--policy FILE [--via-key FILE]] [--replies-only]]"},
		examples: []string{"toolgate inbox --listen 127.0.0.1:8080 --address temporal.example:7233"}},
	{name: "agui", group: groupServe, summary: "the AG-UI endpoint for chat front ends (the runs' workers run elsewhere)",
		usage: []string{"toolgate agui [--listen HOST:PORT] [CONNECTION] [--task-queue Q] [--agui-planner support|openai]",
			"              [--agui-origin URL]... [--host H]... [--listen-tls-cert FILE --listen-tls-key FILE |",
			"              --insecure] [--approval-timeout D] [--idle-timeout D] [--agui-tokens FILE]",
			"              [--policy FILE]"},
		examples: []string{"toolgate agui --listen 127.0.0.1:8090 --address temporal.example:7233"}},
	{name: "mcp serve", group: groupServe, summary: "a worker whose gated tools are served to MCP clients, over HTTP or stdio",
		usage: []string{"toolgate mcp serve --listen HOST:PORT --tokens FILE [--listen-tls-cert FILE --listen-tls-key FILE",
			"                   | --insecure] [--host H]... [--origin O]... [--max-sessions-per-token 16]",
			"                   [--mcp-wait 3m] [--approve-by-elicitation] [worker's flags]",
			"toolgate mcp serve --stdio [--as NAME [--key FILE]] [--run NAME] [--mcp-wait 3m] [worker's flags]"},
		examples: []string{"toolgate mcp serve --listen 127.0.0.1:7243 --tokens mcp-tokens.json --address temporal:7233",
			"toolgate mcp serve --stdio --as alice"}},
	{name: "codec-server", group: groupServe, summary: "decrypt payloads for the Temporal UI and temporal --codec-endpoint",
		usage: []string{"toolgate codec-server [--listen HOST:PORT] --encryption-key-file FILE [--origin URL]...",
			"                      [--auth-file FILE] [--namespace NS]... [--tls-cert FILE --tls-key FILE]",
			"                      [--insecure]"},
		examples: []string{"toolgate codec-server --encryption-key-file keys.json --auth-file codec-auth"}},

	{name: "steps", group: groupOperate, summary: "every call of a run's chain: its status, approver and rewind point",
		usage: []string{"toolgate steps ID [--json] [CONNECTION]"}, examples: []string{"toolgate steps ticket-42"}},
	{name: "rewind", group: groupOperate, summary: "take a run back to before a call: --dry-run shows what and its digest",
		usage: []string{"toolgate rewind ID --to CALL_ID --dry-run [--json] [CONNECTION]",
			"toolgate rewind ID --to CALL_ID --expect DIGEST [--as NAME [--key FILE]] [CONNECTION]"},
		examples: []string{"toolgate rewind ticket-42 --to c-2 --dry-run", "toolgate rewind ticket-42 --to c-2 --expect DIGEST"}},
	{name: "fork", group: groupOperate, summary: "a new run from a run's state before a call, with the same or new arguments",
		usage:    []string{"toolgate fork ID --at CALL_ID --id NEW_ID [--args JSON] [--as NAME [--key FILE]] [CONNECTION]"},
		examples: []string{`toolgate fork ticket-42 --at c-3 --id ticket-42-b --args '{"ticket_id":"TKT-4"}'`}},
	{name: "grant", group: groupOperate, summary: "let a run's later matching calls of a tool pass without asking",
		usage:    []string{"toolgate grant ID TOOL --as NAME --key FILE [--when EXPR] [--uses N] [--for DURATION] [CONNECTION]"},
		examples: []string{`toolgate grant ticket-42 refund --as bob --key bob.key --when "args.amount_cents < 10000" --uses 2`}},
	{name: "revoke", group: groupOperate, summary: "end a grant (toolgate status lists them)",
		usage: []string{"toolgate revoke ID GRANT_ID --as NAME --key FILE [CONNECTION]"}, examples: []string{"toolgate revoke ticket-42 g-1 --as bob --key bob.key"}},
	{name: "pause", group: groupOperate, summary: "the kill switch: stop a tool (--all: every destructive one) in every run",
		usage:    []string{"toolgate pause TOOL|--all --reason TEXT --as NAME --key FILE [--task-queue Q] [CONNECTION]"},
		examples: []string{`toolgate pause refund --reason "refunds double-pay: INC-7" --as alice --key alice.key`}},
	{name: "unpause", group: groupOperate, summary: "let a paused tool run again",
		usage:    []string{"toolgate unpause TOOL|--all --as NAME --key FILE [--reason TEXT] [--task-queue Q] [CONNECTION]"},
		examples: []string{"toolgate unpause refund --as alice --key alice.key"}},
	{name: "guards", group: groupOperate, summary: "the fleet ledger: each guard's use within its window, and what is paused",
		usage:    []string{"toolgate guards [--json] [--task-queue Q] [CONNECTION]"},
		examples: []string{"toolgate guards", "toolgate guards --json"}},
	{name: "versions", group: groupOperate, summary: "open runs per rules version, and which this build runs (exit 3: drain)",
		usage:    []string{"toolgate versions [--json] [--task-queue Q] [CONNECTION]"},
		examples: []string{"toolgate versions"}},
	{name: "replay", group: groupOperate, summary: "replay exported histories against this binary's workflow code",
		usage: []string{"toolgate replay FILE... [--encryption-key-file FILE]"},
		examples: []string{"temporal workflow show --workflow-id ticket-42 --output json > ticket-42.json",
			"toolgate replay ticket-42.json"}},
	{name: "audit", group: groupOperate, summary: "every decision in exported histories: who, by which rule, signature checked",
		usage: []string{"toolgate audit HISTORY.json... [--policy FILE] [--encryption-key-file FILE]",
			"toolgate audit --server [WORKFLOW_ID...] [--policy FILE] [--limit N]"},
		examples: []string{"toolgate audit ticket-42.json", "toolgate audit ticket-42.json --policy policy.yaml", "toolgate audit --server --policy policy.yaml"}},
	{name: "mcp list", group: groupOperate, summary: "how toolgate treats the tools of an MCP file's servers",
		usage: []string{"toolgate mcp list --mcp FILE [--json]"}, examples: []string{"toolgate mcp list --mcp examples/mcp-files.yaml"}},
	{name: "nexus endpoint create", group: groupOperate, summary: "route a Nexus endpoint to toolgate's service (worker --nexus)",
		usage: []string{"toolgate nexus endpoint create NAME [--target-namespace NS] [--task-queue Q] [CONNECTION]"},
		examples: []string{"toolgate nexus endpoint create toolgate --address temporal.example:7233 --namespace agents",
			"toolgate nexus endpoint create toolgate --target-namespace agents --task-queue toolgate-nexus"}},
	{name: "notify test", group: groupOperate, summary: "one test message to every target of a notify file",
		usage: []string{"toolgate notify test FILE"}, examples: []string{"toolgate notify test examples/notify.yaml"}},

	{name: "keys new", group: groupKeys, summary: "an approver's signing key pair, and its line for the policy",
		usage: []string{"toolgate keys new NAME [--dir DIR]"}, examples: []string{"toolgate keys new bob"}},
	{name: "keys encryption", group: groupKeys, summary: "a payload encryption key file, or a newer key in it",
		usage: []string{"toolgate keys encryption FILE"}, examples: []string{"toolgate keys encryption .toolgate/payload-keys.json"}},
	{name: "keys tls", group: groupKeys, summary: "a CA with a server and a client certificate, for the --tls-* flags",
		usage:    []string{"toolgate keys tls DIR [--host H]... [--client-name CN] [--valid-for DURATION]"},
		examples: []string{"toolgate keys tls .toolgate/tls", "toolgate keys tls .toolgate/tls --host temporal.internal"}},
	{name: "nexus sign-start", group: groupKeys, summary: "a start signed for a Nexus caller's run, under a policy (JSON on stdout)",
		usage: []string{"toolgate nexus sign-start --run NAME --as APPROVER --key FILE [--goal TEXT] [--idle-timeout D]",
			"                          [--valid-for D]",
			"toolgate nexus sign-start --run NAME --as APPROVER --key FILE --plan FILE [--valid-for D]"},
		examples: []string{"toolgate nexus sign-start --run desk-1 --as alice --key .toolgate/keys/alice.key > start.json",
			"toolgate nexus sign-start --run plan-1 --plan examples/seed.json --as alice --key alice.key"}},
	{name: "mcp token new", group: groupKeys, summary: "a bearer token for an MCP or AG-UI client (shown once)",
		usage: []string{"toolgate mcp token new NAME --tokens FILE [--key FILE]"}, examples: []string{"toolgate mcp token new alice --tokens mcp-tokens.json"}},
}

// groupedHelp is `toolgate --help`.
func groupedHelp() string {
	var b strings.Builder
	b.WriteString("toolgate — a durable, gated tool executor for AI agents, on Temporal.\n\n")
	width := 0
	for _, cmd := range commandHelp {
		width = max(width, len(cmd.name))
	}
	for _, g := range commandGroups {
		fmt.Fprintf(&b, "%s:\n", g)
		for _, cmd := range commandHelp {
			if cmd.group == g {
				fmt.Fprintf(&b, "  %-*s  %s\n", width, cmd.name, cmd.summary)
			}
		}
	}
	b.WriteString(`CONNECTION: --address, --namespace, --profile, --api-key, --tls-*, as temporal's; and --token-file.
toolgate help COMMAND: its examples and flags. Benchmark: go run ./cmd/toolgate-bench
`)
	return b.String()
}

// isHelpArg is an argument that asks for help.
func isHelpArg(a string) bool {
	return a == "help" || a == "-h" || a == "-help" || a == "--help"
}

// helped is the flag set whose parsing stopped at -h/--help, and its
// command's name ("mcp serve").
type helped struct {
	name string
	fs   *flag.FlagSet
}

// help is `toolgate help COMMAND...`: a command's help (a command of
// several words may be named by its first ones when only one starts so:
// `help notify`), or the list of a group's commands (`help keys`).
func (c *cli) help(ctx context.Context, words []string) error {
	name := strings.Join(words, " ")
	var under []command
	for _, cmd := range commandHelp {
		if cmd.name == name {
			under = []command{cmd}
			break
		}
		if strings.HasPrefix(cmd.name, name+" ") {
			under = append(under, cmd)
		}
	}
	switch len(under) {
	case 0:
		return fmt.Errorf("help %q: no such command (toolgate --help lists them)", name)
	case 1:
	default:
		width := 16
		for _, cmd := range under {
			width = max(width, len(cmd.name))
		}
		for _, cmd := range under {
			fmt.Fprintf(c.stdout, "  %-*s %s\n", width, cmd.name, cmd.summary)
		}
		fmt.Fprintf(c.stdout, "toolgate help %s: what it does, examples, every flag\n", under[0].name)
		return nil
	}
	// The command builds its own flag set and stops at --help, before
	// doing anything: c.flags records the set and dispatch prints it.
	args := append(strings.Fields(under[0].name), "--help")
	c.stopped = nil
	err := c.dispatch(ctx, args)
	if err == nil && c.stopped == nil {
		return fmt.Errorf("toolgate help %s: the command did not stop at --help", under[0].name)
	}
	return err
}

// printHelp prints the help of command name, with the flags of fs.
func printHelp(w io.Writer, name string, fs *flag.FlagSet) {
	cmd := command{name: name, summary: "(no description)"}
	for _, h := range commandHelp {
		if h.name == name {
			cmd = h
		}
	}
	fmt.Fprintf(w, "toolgate %s: %s\n\nusage:\n", cmd.name, cmd.summary)
	for _, u := range cmd.usage {
		fmt.Fprintf(w, "  %s\n", u)
	}
	if len(cmd.examples) > 0 {
		fmt.Fprintf(w, "\nexamples:\n")
		for _, e := range cmd.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	conn := connectionFlags()
	var own, shared []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if u, ok := conn[f.Name]; ok && u == f.Usage {
			shared = append(shared, f)
		} else {
			own = append(own, f)
		}
	})
	if len(own) > 0 {
		fmt.Fprintf(w, "\nflags:\n")
		printFlags(w, own)
	}
	if len(shared) > 0 {
		fmt.Fprintf(w, "\nCONNECTION flags, as the temporal CLI's (a temporal.toml profile, then TEMPORAL_*, then these):\n")
		printFlags(w, shared)
	}
}

// connectionFlags are the connection flags (connect.Settings.AddFlags) by
// name, with their usage.
func connectionFlags() map[string]string {
	fs := flag.NewFlagSet("connection", flag.ContinueOnError)
	(&connect.Settings{}).AddFlags(fs)
	m := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { m[f.Name] = f.Usage })
	return m
}

// printFlags prints flags as flag.PrintDefaults does, with two dashes and
// the usage wrapped to 100 columns.
func printFlags(w io.Writer, flags []*flag.Flag) {
	for _, f := range flags {
		// flag.UnquoteUsage would take a `quoted command` in the usage for
		// the value's name: only the value's type is wanted here.
		plain := *f
		plain.Usage = strings.ReplaceAll(f.Usage, "`", "")
		typ, _ := flag.UnquoteUsage(&plain)
		line := "  --" + f.Name
		if typ != "" {
			line += " " + typ
		}
		fmt.Fprintln(w, line)
		usage := f.Usage
		if !zeroDefault(f) {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		for _, l := range wrap(usage, 100-8) {
			fmt.Fprintf(w, "        %s\n", l)
		}
	}
}

// zeroDefault reports whether f's default is its type's zero value, which
// flag.PrintDefaults does not show either.
func zeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "false", "0", "0s", "[]":
		return true
	}
	return false
}

// wrap splits text into lines of at most width bytes, at spaces (a longer
// word stays whole).
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) > width:
			lines = append(lines, line)
			line = word
		default:
			line += " " + word
		}
	}
	return append(lines, line)
}

// isGroup reports whether word starts commands of several words but is
// none itself (keys, mcp, notify).
func isGroup(word string) bool {
	group := false
	for _, cmd := range commandHelp {
		if cmd.name == word {
			return false
		}
		group = group || strings.HasPrefix(cmd.name, word+" ")
	}
	return group
}
