package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/inbox"
)

// inboxFlags are the flags of the approvals inbox's listener; dev prefixes
// them with "inbox-". The listener's certificate flags have a prefix of their
// own (tlsPrefix: "listen-" for `toolgate inbox`, whose --tls-cert and
// --tls-key are the Temporal client's, as on every command that talks to
// Temporal).
type inboxFlags struct {
	tlsCert, tlsKey *string
	insecure        *bool
	hosts           *string
	tlsFlag         string // the name of the certificate flag, for errors
}

func addInboxFlags(fs *flag.FlagSet, prefix, tlsPrefix string) inboxFlags {
	return inboxFlags{
		tlsCert:  fs.String(tlsPrefix+"tls-cert", "", "serve the inbox over HTTPS with this certificate file (PEM)"),
		tlsKey:   fs.String(tlsPrefix+"tls-key", "", "the private key file (PEM) of --"+tlsPrefix+"tls-cert"),
		tlsFlag:  "--" + tlsPrefix + "tls-cert",
		insecure: fs.Bool(prefix+"insecure", false, "serve the inbox over plain HTTP on a non-loopback address (anyone on the network can then read waiting calls and decide unsigned ones)"),
		hosts:    fs.String(prefix+"host", "", "comma-separated host names the inbox answers to, besides IP addresses and localhost"),
	}
}

// served is an HTTP server this process runs: the inbox, MCP, AG-UI.
type served struct {
	URL string
	srv *http.Server
}

// stop shuts the server down, and cuts what is still open after 5 s
// (event streams, tools/call requests waiting for a human).
func (r *served) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.srv.Shutdown(ctx); err != nil {
		_ = r.srv.Close()
	}
}

// isLoopback says whether host (an IP address or a name) is a loopback address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// inboxListing is what the inbox lists: the runs of queues (none: toolgate's
// default queue), each queried under queryTimeout (0: the client's default).
type inboxListing struct {
	queues       []string
	queryTimeout time.Duration
}

// serveInbox serves the approvals inbox over tc at addr. A non-loopback
// address needs TLS (f.tlsCert and f.tlsKey) or f.insecure, which is warned about.
//
// With rp, the listener also serves the links' confirm page and Slack's
// interactivity endpoint (replies).
func (c *cli) serveInbox(addr string, tc client.Client, conn *connect.Conn, f inboxFlags, l inboxListing, rp *replies) (*served, error) {
	if _, err := c.checkInboxListen(addr, f); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	return c.serveInboxOn(ln, tc, conn, f, l, rp)
}

// serveInboxOn is serveInbox on a listener already open (its address
// checked).
func (c *cli) serveInboxOn(ln net.Listener, tc client.Client, conn *connect.Conn, f inboxFlags, l inboxListing, rp *replies) (*served, error) {
	cert, key := *f.tlsCert, *f.tlsKey
	tls := cert != ""
	var hosts []string
	for _, h := range strings.Split(*f.hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	cl := tgclient.New(tc, tgclient.WithConnection(conn), tgclient.WithQueryTimeout(l.queryTimeout))
	srv := &http.Server{Handler: rp.around(inbox.New(cl, inbox.Options{Hosts: hosts, TaskQueues: l.queues}), cl, hosts),
		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	scheme := "http"
	if tls {
		scheme = "https"
		go func() { _ = srv.ServeTLS(ln, cert, key) }()
	} else {
		go func() { _ = srv.Serve(ln) }()
	}
	return &served{URL: scheme + "://" + ln.Addr().String() + "/", srv: srv}, nil
}

// checkInboxListen refuses a non-loopback addr without TLS or --insecure
// (warned about), and half a TLS configuration; it says whether to serve TLS.
func (c *cli) checkInboxListen(addr string, f inboxFlags) (bool, error) {
	tls, err := checkListen(addr, listenCheck{what: "the inbox", certFlag: f.tlsFlag, cert: *f.tlsCert, key: *f.tlsKey,
		insecure: *f.insecure, plain: "serve plain HTTP to the network"})
	if err == nil && !tls && !isLoopback(hostOfAddr(addr)) {
		fmt.Fprintf(c.stderr, "WARNING: the inbox at %s is plain HTTP on a non-loopback address: anyone who can reach it can read waiting calls and decide those of runs without a policy, and browsers will not sign decisions there (WebCrypto needs https)\n", addr)
	}
	return tls, err
}

// listenCheck is what checkListen needs to know of a door's listen flags.
type listenCheck struct {
	what      string // the door, for messages ("the inbox")
	certFlag  string // its certificate flag ("--listen-tls-cert"); the key's ends in "key"
	cert, key string
	insecure  bool
	plain     string // what --insecure lets it do ("serve plain HTTP to the network")
}

// checkListen refuses a non-loopback addr without TLS or --insecure, and
// half a TLS configuration; it says whether to serve TLS.
func checkListen(addr string, l listenCheck) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("%s's address %q: want HOST:PORT: %w", l.what, addr, err)
	}
	keyFlag := strings.TrimSuffix(l.certFlag, "cert") + "key"
	tls := l.cert != "" || l.key != ""
	if tls && (l.cert == "" || l.key == "") {
		return false, fmt.Errorf("%s over TLS needs both a certificate and its key (%s and %s)", l.what, l.certFlag, keyFlag)
	}
	if !isLoopback(host) && !tls && !l.insecure {
		return false, fmt.Errorf("%s's address %s is not a loopback address: serve it over TLS (%s, %s), or pass --insecure to %s", l.what, addr, l.certFlag, keyFlag, l.plain)
	}
	return tls, nil
}

// inboxCmd is `toolgate inbox`: the approvals inbox for runs on any Temporal server.
func (c *cli) inboxCmd(ctx context.Context, args []string) error {
	fs := c.flags("inbox")
	cn := c.connFlags(fs)
	listen := fs.String("listen", "127.0.0.1:8080", "serve the inbox at this host:port (non-loopback needs --listen-tls-cert/--listen-tls-key or --insecure)")
	f := addInboxFlags(fs, "", "listen-")
	queues := servedQueuesFlag(fs)
	timeout := queryTimeoutFlag(fs)
	notifyFile := fs.String("notify", "", "the workers' notify file: serve its links' confirm page (/confirm) and Slack's interactivity endpoint (/slack/interactions) too")
	policyFile := fs.String("policy", "", "with --notify: the workers' policy, to know who a Slack user or a link's recipient is and whether they may decide by link")
	viaKey := fs.String("via-key", "", "with --notify and --policy: the key (toolgate keys new via) that signs decisions by link for approvers whose via allows it; the policy's via_key is its public key. Never give it to a worker")
	only := fs.Bool("replies-only", false, "with --notify: serve only the confirm page and the Slack endpoint, not the inbox (for the listener at link_base, which mail recipients and Slack reach)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if _, err := c.checkInboxListen(*listen, f); err != nil {
		return err
	}
	tc, conn, err := c.dial(ctx, cn)
	if err != nil {
		return err
	}
	defer tc.Close()
	rp, err := loadReplies(*notifyFile, *policyFile, *viaKey, *only, c.stderr)
	if err != nil {
		return err
	}
	ib, err := c.serveInbox(*listen, tc, conn, f, inboxListing{queues: queues.queues, queryTimeout: *timeout}, rp)
	if err != nil {
		return err
	}
	defer ib.stop()
	if rp == nil || !rp.only {
		fmt.Fprintf(c.stdout, "approvals inbox at %s (Temporal %s, task queue %s)\n", ib.URL, conn.Describe(), strings.Join(queues.queues, ", "))
	}
	rp.say(c.stdout, ib.URL)
	<-ctx.Done()
	return nil
}

// demoInbox serves the demo's inbox on a free loopback port, stopped with
// the stack, and says where (with a policy: which key file to load).
func (c *cli) demoInbox(s *stack, ds *demoSigners, ln net.Listener) (*served, error) {
	no, off := "", false
	ib, err := c.serveInboxOn(ln, s.client, s.conn, inboxFlags{tlsCert: &no, tlsKey: &no, insecure: &off, hosts: &no, tlsFlag: "--inbox-tls-cert"}, inboxListing{}, s.replies())
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c.stdout, "approvals inbox at %s (decide from the browser too)\n", ib.URL)
	if ds != nil {
		fmt.Fprintf(c.stdout, "(to sign there, type an approver's name and paste its key, %s)\n", ds.keyFile("NAME"))
	}
	return ib, nil
}
