// Package smtptest is a mail server on loopback for tests: STARTTLS with a
// certificate of its own CA (package devtls), AUTH PLAIN against one user,
// every message it takes kept in memory.
package smtptest

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/toolgate/toolgate/devtls"
)

// Options configures Start. The zero value is a server with STARTTLS and no
// authentication.
type Options struct {
	// User and Password, when User is set, are the one account AUTH PLAIN
	// accepts; mail is then refused until a client has authenticated.
	User, Password string
	// RefuseRcpt are addresses RCPT TO refuses with 550.
	RefuseRcpt []string
	// NoSTARTTLS makes a server that does not offer STARTTLS (and offers
	// AUTH in plaintext: a client must refuse it on its own).
	NoSTARTTLS bool
}

// Message is one message the server took.
type Message struct {
	From string
	To   []string
	Data []byte
	// User is who had authenticated ("" for nobody).
	User string
}

// Server is a running test mail server.
type Server struct {
	opts   Options
	srv    *smtp.Server
	addr   string
	caFile string

	mu    sync.Mutex
	msgs  []Message
	auths []string
}

// Start starts a server on 127.0.0.1 and stops it when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{opts: opts}
	files, err := devtls.Generate(t.TempDir(), devtls.Options{})
	if err != nil {
		t.Fatalf("smtptest: certificates: %v", err)
	}
	s.caFile = files.CA
	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.MaxMessageBytes = 1 << 20
	srv.MaxRecipients = 50
	srv.ErrorLog = log.New(io.Discard, "", 0)
	if opts.NoSTARTTLS {
		srv.AllowInsecureAuth = true
	} else {
		cert, err := tls.LoadX509KeyPair(files.ServerCert, files.ServerKey)
		if err != nil {
			t.Fatalf("smtptest: server certificate: %v", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("smtptest: listen: %v", err)
	}
	s.srv, s.addr = srv, l.Addr().String()
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// Addr is the server's HOST:PORT.
func (s *Server) Addr() string { return s.addr }

// CAFile is the PEM file of the CA that signed the server's certificate:
// what a client's ca_file trusts.
func (s *Server) CAFile() string { return s.caFile }

// Messages are the messages taken so far, in order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.msgs)
}

// Auths are the users every AUTH attempt gave, in order, whether or not it
// succeeded: a client that refused to authenticate left none.
func (s *Server) Auths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.auths)
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	return &session{s: s, c: c}, nil
}

type session struct {
	s    *Server
	c    *smtp.Conn
	user string
	from string
	to   []string
}

var _ smtp.AuthSession = (*session)(nil)

// AuthMechanisms offers PLAIN when the server has a user.
func (x *session) AuthMechanisms() []string {
	if x.s.opts.User == "" {
		return nil
	}
	return []string{sasl.Plain}
}

// Auth checks PLAIN credentials against the server's user, recording each attempt.
func (x *session) Auth(mech string) (sasl.Server, error) {
	if mech != sasl.Plain {
		return nil, smtp.ErrAuthUnsupported
	}
	return sasl.NewPlainServer(func(identity, user, password string) error {
		x.s.mu.Lock()
		x.s.auths = append(x.s.auths, user)
		x.s.mu.Unlock()
		if user != x.s.opts.User || password != x.s.opts.Password {
			return smtp.ErrAuthFailed
		}
		x.user = user
		return nil
	}), nil
}

// Mail takes the sender, once authenticated if the server has a user.
func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	if x.s.opts.User != "" && x.user == "" {
		return smtp.ErrAuthRequired
	}
	x.from = from
	return nil
}

// Rcpt takes a recipient, or refuses it with 550 (Options.RefuseRcpt).
func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	for _, r := range x.s.opts.RefuseRcpt {
		if strings.EqualFold(r, to) {
			return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox"}
		}
	}
	x.to = append(x.to, to)
	return nil
}

// Data records the message.
func (x *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	x.s.mu.Lock()
	x.s.msgs = append(x.s.msgs, Message{From: x.from, To: slices.Clone(x.to), Data: data, User: x.user})
	x.s.mu.Unlock()
	return nil
}

// Reset forgets the message under way (RSET, or after DATA).
func (x *session) Reset() { x.from, x.to = "", nil }

// Logout ends the session.
func (x *session) Logout() error { return nil }
