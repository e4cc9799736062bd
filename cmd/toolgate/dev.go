package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/mcpserve"
	"github.com/toolgate/toolgate/nexusserve"
	"github.com/toolgate/toolgate/workflows"
)

// dev is `toolgate dev`: the embedded server and (unless --no-worker) a
// worker, until Ctrl-C.
func (c *cli) dev(ctx context.Context, args []string) error {
	fs := c.flags("dev")
	data := dataFlag(fs)
	address := fs.String("address", envOr("TEMPORAL_ADDRESS", "127.0.0.1:7233"), "frontend gRPC host:port of the embedded server (default $TEMPORAL_ADDRESS, where the other commands connect, or 127.0.0.1:7233)")
	ui := fs.String("ui-address", "", "serve the Temporal UI at this host:port (empty: no UI)")
	namespace := fs.String("namespace", envOr("TEMPORAL_NAMESPACE", "default"), "namespace")
	db := fs.String("db", "", "the embedded server's database: empty for SQLite under --data, or postgres://USER[:PASSWORD]@HOST:PORT/DB?sslmode=disable (history in DB, visibility in DB_visibility; both created and migrated if needed; the password may come from PGPASSWORD)")
	noWorker := fs.Bool("no-worker", false, "serve only: run no worker in this process (start `toolgate worker` processes against --address)")
	httpAPI := fs.Bool("http-api", false, "also serve the frontend's HTTP API on a free port of --address's IP: unauthenticated, so any local process and any web page in your browser can start and signal runs through it")
	inboxAddr := fs.String("inbox-address", "", "serve the approvals inbox at this host:port (empty: none; non-loopback needs --inbox-tls-cert/--inbox-tls-key or --inbox-insecure)")
	ibf := addInboxFlags(fs, "inbox-", "inbox-")
	viaKeyFile := fs.String("via-key", "", "with --notify, --policy and --inbox-address: the key (toolgate keys new via) that signs decisions by link for approvers whose via allows it; the policy's via_key is its public key")
	keyFile := fs.String("encryption-key-file", "", "encrypt the payloads of this process's worker and client with this key file (toolgate keys encryption FILE); with --ui-address, a codec server on loopback lets the UI show them")
	tlsCert := fs.String("tls-cert", "", "serve --address with TLS only: the server's certificate (PEM; `toolgate keys tls DIR` makes one); with --tls-key")
	tlsKey := fs.String("tls-key", "", "the private key (PEM) of --tls-cert")
	tlsClientCA := fs.String("tls-client-ca", "", "with --tls-cert: require client certificates signed by this CA (PEM) on --address (mutual TLS). This process's worker and the UI present a certificate of the server's own (DATA/auth/local-tls); the server's own parts use a plaintext frontend on 127.0.0.1")
	var tlsWorkers listFlag
	fs.Var(&tlsWorkers, "tls-worker-name", "with --tls-client-ca: client certificates with this subject common name get the worker role (repeat or comma-separate; any other certificate gets a person's; the worker token works under TLS too)")
	mcpAddr := fs.String("mcp-address", "", "also serve the worker's tools to MCP clients at http://HOST:PORT/mcp (loopback; with --mcp-tokens; needs the in-process worker)")
	mcpTokens := fs.String("mcp-tokens", "", "with --mcp-address: the bearer tokens MCP clients may use (toolgate mcp token new NAME --tokens FILE)")
	mcpWait := fs.Duration("mcp-wait", mcpserve.DefaultWait, "with --mcp-address: how long a tools/call stays open for a call that waits for a human")
	aguiAddr := fs.String("agui-address", "", "also serve AG-UI at http://HOST:PORT/agui and the example chat page at http://HOST:PORT/ (loopback)")
	nexusEndpoint := fs.String("nexus-endpoint", "", "serve toolgate as a Nexus service (service toolgate: call, run) to the workflows on this server: "+
		"its worker runs in this process on task queue "+nexusserve.TaskQueue+", and the Nexus endpoint NAME (made if missing) routes to it; "+
		"the server then serves its HTTP port, for Nexus requests only; with --policy, the runs it starts must be signed (toolgate nexus sign-start)")
	af := addAGUIFlags(fs)
	sv := servingFlags(fs)
	tel, err := c.parseServing(ctx, fs, args, sv, keyFile)
	if err != nil {
		return err
	}
	toks, err := devMCPTokens(*mcpAddr, *mcpTokens, *noWorker)
	if err == nil {
		err = checkDevAGUI(*aguiAddr, af)
	}
	if err == nil && *nexusEndpoint != "" {
		err = checkDevNexus(*nexusEndpoint, *tlsCert != "" || *tlsKey != "")
	}
	if err == nil && len(tlsWorkers) > 0 && *tlsClientCA == "" {
		err = errors.New("--tls-worker-name goes with --tls-client-ca: it names client certificates")
	}
	if err != nil {
		tel.stop()
		return err
	}
	defer tel.stop() // after the worker has stopped (deferred below): its last spans are sent
	serverTLS, err := devTLSOptions(*tlsCert, *tlsKey, *tlsClientCA)
	if err != nil {
		return err
	}
	wo, err := sv.workerOptions(tel, c.stderr)
	if err != nil {
		return err
	}
	wp := &wo
	if *noWorker {
		wp = nil
	}
	srvOpts := devserver.Options{DataDir: *data, Database: *db, Address: *address, UIAddress: *ui, Namespace: *namespace, HTTPAPI: *httpAPI, TLS: serverTLS,
		Nexus: *nexusEndpoint != "", Authorization: &devserver.AuthOptions{KeyDir: filepath.Join(*data, "auth"), WorkerSubjects: tlsWorkers}}
	var codec *devCodec
	if *keyFile != "" && *ui != "" {
		if codec, err = startDevCodec(ctx, *keyFile); err != nil {
			return err
		}
		defer codec.close()
		srvOpts.UICodecEndpoint = codec.srv.URL
	}
	if *viaKeyFile != "" && (wo.notify == nil || *inboxAddr == "") {
		return errors.New("--via-key goes with --notify and --inbox-address: it signs the decisions made by link on the inbox's listener")
	}
	s, err := c.up(ctx, srvOpts, connect.Settings{EncryptionKeyFile: *keyFile}, wp, tel.handler())
	if err != nil {
		return err
	}
	defer s.stop()
	if s.viaKey, err = loadViaKey(*viaKeyFile, wo.notify, wo.policy); err != nil {
		return err
	}
	if u := s.server.UIAddress(); u != "" {
		fmt.Fprintf(c.stdout, "Temporal UI at http://%s\n", u)
		if codec != nil {
			if err := codec.allow(u); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "codec server for the UI at %s (loopback; any local process can decrypt through it)\n", codec.srv.URL)
		}
	}
	if h := s.server.HTTPAddress(); h != "" && *httpAPI { // with --nexus-endpoint alone, it serves Nexus requests only
		if serverTLS != nil {
			fmt.Fprintf(c.stdout, "Temporal HTTP API at https://%s\n", h)
		} else {
			fmt.Fprintf(c.stdout, "Temporal HTTP API at http://%s (unauthenticated)\n", h)
		}
	}
	if serverTLS != nil {
		auth := "no client certificates"
		if serverTLS.ClientCAFile != "" {
			auth = "client certificates of " + serverTLS.ClientCAFile + " required"
		}
		fmt.Fprintf(c.stdout, "TLS on %s (%s)\n", s.server.Address(), auth)
	}
	fmt.Fprintf(c.stdout, "worker token in %s (renewed daily): without it a client has a person's role; another worker connects with "+
		"`toolgate worker --address %s --token-file %s` (or TOOLGATE_TOKEN_FILE)\n", s.server.WorkerTokenFile(), s.server.Address(), s.server.WorkerTokenFile())
	// The front doors (inbox, AG-UI, MCP) act for people: they reach the
	// server with no credential, a person's role, so that what they do is
	// attributed to a person, never to a worker.
	fd := *s
	if fd.client, err = c.dialPerson(ctx, s.server, *keyFile); err != nil {
		return err
	}
	defer fd.client.Close()
	if *inboxAddr != "" {
		ib, err := c.serveInbox(*inboxAddr, fd.client, s.conn, ibf, inboxListing{}, s.replies())
		if err != nil {
			return err
		}
		defer ib.stop()
		fmt.Fprintf(c.stdout, "approvals inbox at %s\n", ib.URL)
		s.replies().say(c.stdout, ib.URL)
	} else if wo.notify != nil && (wo.notify.LinkBase != "" || len(wo.notify.SlackSigningSecrets()) > 0) {
		fmt.Fprintf(c.stderr, "WARNING: --notify's links and Slack buttons are answered on the inbox's listener: serve it (--inbox-address) where link_base and the Slack app's request URL point\n")
	}
	if *aguiAddr != "" {
		a, err := c.devAGUI(*aguiAddr, &fd, af)
		if err != nil {
			return err
		}
		defer a.stop()
	}
	if *mcpAddr != "" {
		no, off := "", false
		m, err := c.serveMCPHTTP(*mcpAddr, *mcpTokens, mcpServeOptions{tc: fd.client, taskQueue: workflows.TaskQueue, tools: s.tools,
			policy: s.policy, wait: *mcpWait, tokens: toks}, &mcpHTTPFlags{tlsCert: &no, tlsKey: &no, insecure: &off})
		if err != nil {
			return err
		}
		defer m.stop()
	}
	if *nexusEndpoint != "" {
		nw, err := c.devNexus(ctx, s, *nexusEndpoint, wo.policy != nil)
		if err != nil {
			return err
		}
		defer nw.Stop()
		c.warnNexusEncrypted(*keyFile)
	}
	fmt.Fprintf(c.stdout, "ready %s\n", s.server.Address())
	<-ctx.Done()
	fmt.Fprintln(c.stdout, "stopping")
	return nil
}

// dialPerson dials the dev server's public frontend with no credential (a
// person's role; under TLS with the server's own client certificate, a
// person's too), encrypting with keyFile if set.
func (c *cli) dialPerson(ctx context.Context, srv *devserver.Server, keyFile string) (client.Client, error) {
	lw, ok := srv.LocalWorker()
	if !ok {
		return nil, errors.New("the embedded server runs without authorization")
	}
	cs := connect.Settings{Address: lw.Address, Namespace: srv.Namespace(), Isolated: true, EncryptionKeyFile: keyFile}
	if lw.TLS {
		cs.TLS, cs.TLSCA, cs.TLSCert, cs.TLSKey = &lw.TLS, lw.ServerCAFile, lw.CertFile, lw.KeyFile
	}
	tc, _, err := c.dialWith(ctx, &cs, nil)
	return tc, err
}

// devNexus starts the Nexus service's worker on the stack's client (its runs
// on the stack's task queue; policy: they start only signed), creates the
// endpoint name routing to it, and says so.
func (c *cli) devNexus(ctx context.Context, s *stack, name string, policy bool) (sdkworker.Worker, error) {
	w, err := startNexus(s.client, s.conn, nexusserve.TaskQueue, workflows.TaskQueue, policy)
	if err != nil {
		return nil, err
	}
	ep, err := nexusserve.CreateEndpoint(ctx, s.client, name, s.server.Namespace(), nexusserve.TaskQueue)
	if err != nil {
		w.Stop()
		return nil, fmt.Errorf("--nexus-endpoint: %w", err)
	}
	fmt.Fprintln(c.stdout, endpointLine(ep))
	return w, nil
}

// checkDevNexus checks dev's --nexus-endpoint NAME; tls: the server serves
// TLS, under which it cannot serve Nexus (devserver.ErrNexusUnderTLS).
func checkDevNexus(name string, tls bool) error {
	if tls {
		return errors.New("--nexus-endpoint does not go with --tls-cert/--tls-key: under TLS the embedded server's history sends its Nexus requests in plaintext " +
			"to an internal frontend that answers only TLS, so no operation would arrive; serve Nexus from a dev without TLS (it listens on 127.0.0.1), " +
			"or run `toolgate worker --nexus` against a Temporal cluster of yours")
	}
	return checkEndpointName("--nexus-endpoint", name)
}

// devTLSOptions are the embedded server's TLS options from dev's --tls-*
// flags (nil: no TLS).
func devTLSOptions(cert, key, clientCA string) (*devserver.TLSOptions, error) {
	switch {
	case cert == "" && key == "" && clientCA == "":
		return nil, nil
	case cert == "" || key == "":
		return nil, errors.New("TLS needs both the server's certificate and its key (--tls-cert and --tls-key)")
	}
	return &devserver.TLSOptions{CertFile: cert, KeyFile: key, ClientCAFile: clientCA}, nil
}

// devMCPTokens checks dev's MCP flags and loads the tokens (nil: no MCP).
func devMCPTokens(addr, tokensFile string, noWorker bool) (*mcpserve.Tokens, error) {
	switch {
	case addr == "" && tokensFile == "":
		return nil, nil
	case addr == "":
		return nil, errors.New("--mcp-tokens goes with --mcp-address HOST:PORT")
	case tokensFile == "":
		return nil, errors.New("--mcp-address needs --mcp-tokens FILE: make a token with `toolgate mcp token new NAME --tokens FILE`")
	case noWorker:
		return nil, errors.New("--mcp-address serves the in-process worker's tools: drop --no-worker, or run `toolgate mcp serve` against this server")
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--mcp-address %q: want HOST:PORT: %w", addr, err)
	}
	if !isLoopback(host) {
		return nil, fmt.Errorf("--mcp-address %s is not a loopback address: dev serves MCP on loopback only; for the network use `toolgate mcp serve` with --listen-tls-cert/--listen-tls-key", addr)
	}
	return mcpserve.LoadTokens(tokensFile)
}
