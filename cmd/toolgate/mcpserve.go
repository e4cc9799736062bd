package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"go.temporal.io/sdk/client"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/mcpserve"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
)

const mcpUsage = `usage:
  toolgate mcp list --mcp FILE [--json]
      how toolgate treats the tools of an MCP file's servers (tools it takes FROM them)
  toolgate mcp serve --listen HOST:PORT --tokens FILE [--mcp-wait 3m] [--host H]... [--origin O]... [--max-sessions-per-token 16] [--approve-by-elicitation]
                     [--listen-tls-cert FILE --listen-tls-key FILE | --insecure] [WORKER FLAGS]
  toolgate mcp serve --stdio [--as NAME [--key FILE]] [--run NAME] [--mcp-wait 3m] [WORKER FLAGS]
      serve the worker's gated tools TO MCP clients, running the worker in-process
      (WORKER FLAGS: those of toolgate worker: CONNECTION, --task-queue, --data, --policy, --mcp …)
  toolgate mcp token new NAME --tokens FILE [--key FILE]
      make a bearer token for NAME (shown once; only its hash is kept)`

// mcp is `toolgate mcp list|serve|token`.
func (c *cli) mcp(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(mcpUsage)
	}
	switch args[0] {
	case "list":
		return c.mcpList(ctx, args[1:])
	case "serve":
		return c.mcpServe(ctx, args[1:])
	case "token":
		if len(args) < 2 || args[1] != "new" {
			return errors.New(mcpUsage)
		}
		return c.mcpTokenNew(args[2:])
	}
	return fmt.Errorf("unknown mcp command %q\n%s", args[0], mcpUsage)
}

// mcpTokenNew is `toolgate mcp token new NAME --tokens FILE [--key FILE]`.
func (c *cli) mcpTokenNew(args []string) error {
	fs := c.flags("mcp token new")
	file := fs.String("tokens", "", "the tokens file (made 0600 if missing)")
	key := fs.String("key", "", "NAME's signing key (toolgate keys new): with a worker policy, the runs of NAME's sessions start signed by NAME")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *file == "" {
		return errors.New("usage: toolgate mcp token new NAME --tokens FILE [--key FILE]")
	}
	tok, err := mcpserve.NewToken(*file, pos[0], *key)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, tok)
	fmt.Fprintf(c.stderr, "token for %s added to %s: it is shown this once, and only its SHA-256 is kept; a client sends it as Authorization: Bearer TOKEN\n", pos[0], *file)
	return nil
}

// mcpHTTPFlags are the flags of serving MCP over HTTP.
type mcpHTTPFlags struct {
	tlsCert, tlsKey *string
	insecure        *bool
	hosts, origins  listFlag
}

func addMCPHTTPFlags(fs *flag.FlagSet) *mcpHTTPFlags {
	f := &mcpHTTPFlags{
		tlsCert:  fs.String("listen-tls-cert", "", "serve MCP over HTTPS with this certificate (PEM); with --listen-tls-key"),
		tlsKey:   fs.String("listen-tls-key", "", "the private key (PEM) of --listen-tls-cert"),
		insecure: fs.Bool("insecure", false, "serve plain HTTP on a non-loopback --listen (bearer tokens then cross the network in the clear)"),
	}
	fs.Var(&f.hosts, "host", "a host name (or HOST:PORT) clients reach the server by, besides the listen address and localhost (repeat, or comma-separated)")
	fs.Var(&f.origins, "origin", "a browser origin, scheme://host[:port], whose pages may call the server (repeat, or comma-separated; default none: a request with an Origin header is refused)")
	return f
}

// mcpServe is `toolgate mcp serve`: a worker, and MCP over HTTP or stdio on top.
func (c *cli) mcpServe(ctx context.Context, args []string) error {
	fs := c.flags("mcp serve")
	wf := c.addWorkerFlags(fs)
	listen := fs.String("listen", "", "serve MCP over HTTP at HOST:PORT, path /mcp (with --tokens)")
	tokensFile := fs.String("tokens", "", "the bearer tokens HTTP accepts (toolgate mcp token new NAME --tokens FILE)")
	stdio := fs.Bool("stdio", false, "serve MCP on stdin and stdout instead (stdout carries only MCP; logs go to stderr)")
	as := fs.String("as", "stdio", "with --stdio: the caller's name (runs are mcp-NAME-RUN)")
	runName := fs.String("run", "", "with --stdio: the run's name (default: a new one each start)")
	keyFile := fs.String("key", "", "with --stdio and a worker --policy: --as NAME's signing key (toolgate keys new), so the runs start signed by NAME, their verified requester")
	wait := fs.Duration("mcp-wait", mcpserve.DefaultWait, "how long a tools/call stays open for a call that waits for a human")
	hf := addMCPHTTPFlags(fs)
	elicit := fs.Bool("approve-by-elicitation", false, "let a client that supports MCP elicitation ask its own user to approve or reject a call waiting at the gate, shown whole "+
		"(recorded as approver elicitation:NAME; never a tool's own question, nor a call whose arguments do not fit a question whole: an operator decides those); "+
		"refused with --policy: the agent's host is not an authenticated approver")
	maxSessions := fs.Int("max-sessions-per-token", mcpserve.DefaultMaxSessionsPerToken, "with --listen: how many MCP sessions one token may have open at once")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *stdio == (*listen != "") {
		return errors.New("mcp serve needs one of --listen HOST:PORT (with --tokens FILE) or --stdio\n" + mcpUsage)
	}
	w := c
	var toks *mcpserve.Tokens
	var stdioKeys map[string]ed25519.PrivateKey
	if *stdio {
		if *tokensFile != "" || *hf.tlsCert != "" || *hf.tlsKey != "" || *hf.insecure || len(hf.hosts) > 0 || len(hf.origins) > 0 {
			return errors.New("mcp serve --stdio takes no --tokens, --listen-tls-*, --insecure, --host or --origin: over stdio the caller is whoever started the process")
		}
		if *keyFile != "" {
			key, err := signed.ReadPrivateKey(*keyFile)
			if err != nil {
				return fmt.Errorf("--key: %w", err)
			}
			stdioKeys = map[string]ed25519.PrivateKey{*as: key}
		}
		if *runName == "" {
			*runName = "s" + time.Now().UTC().Format("20060102-150405")
		}
		// stdout is the MCP stream: what the worker would print goes to stderr.
		w = &cli{stdin: c.stdin, stdout: c.stderr, stderr: c.stderr}
	} else {
		if *as != "stdio" || *runName != "" || *keyFile != "" {
			return errors.New("--as, --run and --key go with --stdio; over HTTP the caller is the token's name and the run is the client's (header Toolgate-Run, or the session)")
		}
		if *tokensFile == "" {
			return errors.New("mcp serve --listen needs --tokens FILE: make a token with `toolgate mcp token new NAME --tokens FILE`")
		}
		if _, err := checkMCPListen(*listen, hf); err != nil {
			return err
		}
		var err error
		if toks, err = mcpserve.LoadTokens(*tokensFile); err != nil {
			return err
		}
	}
	rw, err := w.startWorker(ctx, fs, args, wf)
	if err != nil {
		return err
	}
	defer rw.stop()
	opts := mcpServeOptions{tc: rw.client, taskQueue: *wf.tq, tools: rw.opts.Config().Tools, policy: rw.opts.Policy != nil, wait: *wait, keys: stdioKeys, elicit: *elicit}
	if *stdio {
		fmt.Fprintf(c.stderr, "worker ready on %s, task queue %s; MCP on stdio as %s, run %s\n", rw.conn.Describe(), *wf.tq, *as, mcpserve.WorkflowID(*as, *runName))
		srv, err := c.newMCPServer(opts, nil, nil)
		if err != nil {
			return err
		}
		return srv.ServeStdio(ctx, *as, *runName, c.stdin, c.stdout)
	}
	opts.tokens, opts.maxSessions = toks, *maxSessions
	m, err := c.serveMCPHTTP(*listen, *tokensFile, opts, hf)
	if err != nil {
		return err
	}
	defer m.stop()
	fmt.Fprintf(c.stdout, "worker ready on %s, task queue %s\n", rw.conn.Describe(), *wf.tq)
	<-ctx.Done()
	return nil
}

// mcpServeOptions are what an MCP server needs of its worker.
type mcpServeOptions struct {
	tc        client.Client
	taskQueue string
	tools     []tool.Spec
	policy    bool
	wait      time.Duration
	tokens    *mcpserve.Tokens
	// maxSessions bounds the HTTP sessions of a token (0: the default).
	maxSessions int
	keys        map[string]ed25519.PrivateKey // the stdio caller's signing key
	elicit      bool                          // --approve-by-elicitation
}

func (c *cli) newMCPServer(o mcpServeOptions, hosts, origins []string) (*mcpserve.Server, error) {
	return mcpserve.New(mcpserve.Options{
		Runs:                tgclient.New(o.tc, tgclient.WithTaskQueue(o.taskQueue)),
		Tools:               o.tools,
		Tokens:              o.tokens,
		Hosts:               hosts,
		Origins:             origins,
		Wait:                o.wait,
		Policy:              o.policy,
		MaxSessionsPerToken: o.maxSessions,
		Keys:                o.keys,
		ElicitApprovals:     o.elicit,
		Logger:              slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Name:                "toolgate",
	})
}

// checkMCPListen refuses a non-loopback addr without TLS or --insecure
// (warned about), and half a TLS configuration; it says whether to serve TLS.
func checkMCPListen(addr string, f *mcpHTTPFlags) (bool, error) {
	return checkListen(addr, listenCheck{what: "MCP", certFlag: "--listen-tls-cert", cert: *f.tlsCert, key: *f.tlsKey,
		insecure: *f.insecure, plain: "send bearer tokens over plain HTTP"})
}

// serveMCPHTTP serves MCP at addr (path /mcp) and says where.
func (c *cli) serveMCPHTTP(addr, tokensFile string, o mcpServeOptions, f *mcpHTTPFlags) (*served, error) {
	tls, err := checkMCPListen(addr, f)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("MCP server: %w", err)
	}
	hosts := append(mcpserve.LoopbackHosts(ln.Addr().String()), f.hosts...)
	srv, err := c.newMCPServer(o, hosts, f.origins)
	if err == nil {
		var h http.Handler
		if h, err = srv.Handler(); err == nil {
			m := &served{srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}}
			scheme := "http"
			if tls {
				scheme = "https"
				go func() { _ = m.srv.ServeTLS(ln, *f.tlsCert, *f.tlsKey) }()
			} else {
				go func() { _ = m.srv.Serve(ln) }()
				if !isLoopback(hostOfAddr(addr)) {
					fmt.Fprintf(c.stderr, "WARNING: MCP at %s is plain HTTP on a non-loopback address: bearer tokens and calls cross the network in the clear\n", addr)
				}
			}
			m.URL = scheme + "://" + ln.Addr().String() + mcpserve.Path
			fmt.Fprintf(c.stdout, "MCP server at %s (tokens: %s)\n", m.URL, tokensFile)
			return m, nil
		}
	}
	_ = ln.Close()
	return nil, err
}

// hostOfAddr is the host of HOST:PORT ("" if it is not one).
func hostOfAddr(addr string) string {
	h, _, _ := net.SplitHostPort(addr)
	return h
}
