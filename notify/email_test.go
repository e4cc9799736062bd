package notify

import (
	"bytes"
	"context"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/internal/smtptest"
	"github.com/toolgate/toolgate/workflows"
)

const (
	smtpUser = "mailer"
	smtpPass = "smtp-pass-do-not-leak"
)

func emailConfig(srv *smtptest.Server, to ...string) *Config {
	return &Config{Targets: []Target{{Name: "mail", SMTP: srv.Addr(), From: "toolgate <toolgate@example.com>",
		User: smtpUser, Password: smtpPass, To: to, CAFile: srv.CAFile(), Timeout: "5s"}}}
}

// parsed is a message as a reader sees it: its headers, its decoded body.
type parsed struct {
	header mail.Header
	body   string
}

func parseMessage(t *testing.T, data []byte) parsed {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(data))
	require.NoError(t, err)
	var r io.Reader = m.Body
	if m.Header.Get("Content-Transfer-Encoding") == "quoted-printable" {
		r = quotedprintable.NewReader(m.Body)
	}
	body, err := io.ReadAll(r)
	require.NoError(t, err)
	return parsed{header: m.Header, body: string(body)}
}

var linkInBody = regexp.MustCompile(`https://toolgate\.example/confirm\?t=\S+`)

func TestEmailOneMessagePerRecipient(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{User: smtpUser, Password: smtpPass})
	c := emailConfig(srv, "Ops <ops@example.com>", "Alice@example.com") // alice twice: one message
	pub := withLinks(t, c)
	n := waiting("mail")
	d, err := NewSender(c).Deliver(context.Background(), n)
	require.NoError(t, err)
	assert.Equal(t, "3 messages: alice@example.com, bob@example.com, ops@example.com", d.Detail)

	msgs := srv.Messages()
	require.Len(t, msgs, 3)
	wantTo := []string{"alice@example.com", "bob@example.com", "ops@example.com"}
	wantRecipient := []string{"alice", "bob", "ops@example.com"}
	seenTokens := map[string]bool{}
	seenIDs := map[string]bool{}
	for i, m := range msgs {
		assert.Equal(t, smtpUser, m.User, "AUTH worked")
		assert.Equal(t, "toolgate@example.com", m.From)
		assert.Equal(t, []string{wantTo[i]}, m.To, "one recipient a message")
		p := parseMessage(t, m.Data)
		assert.Contains(t, p.header.Get("To"), wantTo[i])
		subject, err := new(mime.WordDecoder).DecodeHeader(p.header.Get("Subject"))
		require.NoError(t, err)
		assert.Equal(t, "[toolgate] close_ticket c-3 waits for your decision — run run-1", subject)
		assert.Equal(t, "run-1/r-1/waiting/c-3/mail", p.header.Get("Idempotency-Key"))
		assert.Equal(t, "text/plain; charset=utf-8", p.header.Get("Content-Type"))
		assert.Equal(t, "1.0", p.header.Get("MIME-Version"))
		_, err = p.header.Date()
		assert.NoError(t, err)
		id := p.header.Get("Message-ID")
		assert.Regexp(t, `^<[0-9a-f]{16}@toolgate>$`, id)
		seenIDs[id] = true

		for _, want := range []string{"close_ticket (c-3) waits for a decision", "Run: run-1 (run r-1)", "Reason: destructive <@here> & more",
			"Who may decide: 1 of support-lead: alice <alice@example.com>, bob <bob@example.com>", "args_digest: d1g3st",
			`"note":"<script>alert(1)</script> <!here>"`,
			"Open this link to decide (opening it decides nothing; the page asks you to confirm): https://toolgate.example/confirm?t="} {
			assert.Contains(t, p.body, want)
		}
		link := linkInBody.FindString(p.body)
		require.NotEmpty(t, link)
		tok := linkToken(t, link)
		seenTokens[tok] = true
		l, err := VerifyLink(pub, tok, time.Now())
		require.NoError(t, err)
		assert.Equal(t, wantRecipient[i], l.Recipient)
		assert.Equal(t, "email", l.Channel)
		assert.Equal(t, "c-3", l.CallID)
		assert.Equal(t, "d1g3st", l.ArgsDigest)
		assert.NotContains(t, string(m.Data), smtpPass)
	}
	assert.Len(t, seenTokens, 3, "each message its own token")
	assert.Len(t, seenIDs, 3, "each message its own Message-ID")
}

func TestEmailHeaderInjection(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	c := emailConfig(srv, "ops@example.com")
	c.Targets[0].User, c.Targets[0].Password = "", ""
	n := waiting("mail")
	n.WorkflowID = "run-1\r\nBcc: evil@x"
	n.Tool = "close\nX-Evil: 1"
	n.Approvers = nil
	_, err := NewSender(c).Deliver(context.Background(), n)
	require.NoError(t, err)
	msgs := srv.Messages()
	require.Len(t, msgs, 1)
	assert.Equal(t, []string{"ops@example.com"}, msgs[0].To)
	head, _, _ := strings.Cut(string(msgs[0].Data), "\r\n\r\n")
	for _, line := range strings.Split(head, "\r\n") {
		assert.False(t, strings.HasPrefix(strings.ToLower(line), "bcc:"), "injected header: %q", line)
		assert.False(t, strings.HasPrefix(strings.ToLower(line), "x-evil:"), "injected header: %q", line)
	}
	p := parseMessage(t, msgs[0].Data)
	assert.Empty(t, p.header.Get("Bcc"))
	subject, err := new(mime.WordDecoder).DecodeHeader(p.header.Get("Subject"))
	require.NoError(t, err)
	assert.Equal(t, "[toolgate] close X-Evil: 1 c-3 waits for your decision — run run-1  Bcc: evil@x", subject)
}

func TestEmailRequiresSTARTTLS(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{User: smtpUser, Password: smtpPass, NoSTARTTLS: true})
	_, err := NewSender(emailConfig(srv, "ops@example.com")).Deliver(context.Background(), waiting("mail"))
	ae := requireRefused(t, err)
	assert.Contains(t, ae.Message(), "mail (email): ")
	assert.Contains(t, ae.Message(), "does not offer STARTTLS")
	assert.NotContains(t, ae.Message(), smtpPass)
	assert.Empty(t, srv.Auths(), "no credentials sent")
	assert.Empty(t, srv.Messages())
}

func TestEmailUntrustedCertificate(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{User: smtpUser, Password: smtpPass})
	other := smtptest.Start(t, smtptest.Options{})
	c := emailConfig(srv, "ops@example.com")
	c.Targets[0].CAFile = other.CAFile() // not the CA of srv's certificate
	_, err := NewSender(c).Deliver(context.Background(), waiting("mail"))
	ae := requireRefused(t, err)
	assert.Contains(t, ae.Message(), "STARTTLS")
	assert.Empty(t, srv.Auths())
}

func TestEmailBadPassword(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{User: smtpUser, Password: "another"})
	_, err := NewSender(emailConfig(srv, "ops@example.com")).Deliver(context.Background(), waiting("mail"))
	ae := requireRefused(t, err)
	assert.Contains(t, ae.Message(), "AUTH: 535")
	assert.NotContains(t, ae.Message(), smtpPass)
	assert.Equal(t, []string{smtpUser}, srv.Auths(), "over TLS")
}

func TestEmailRefusedRecipient(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{User: smtpUser, Password: smtpPass, RefuseRcpt: []string{"bob@example.com"}})
	_, err := NewSender(emailConfig(srv, "ops@example.com")).Deliver(context.Background(), waiting("mail"))
	ae := requireRefused(t, err)
	assert.Contains(t, ae.Message(), "not sent to bob@example.com (550")
	assert.Contains(t, ae.Message(), "sent: alice@example.com, ops@example.com")
	var to []string
	for _, m := range srv.Messages() {
		to = append(to, m.To...)
	}
	assert.Equal(t, []string{"alice@example.com", "ops@example.com"}, to, "the others still got theirs")
}

func TestEmailNoRecipient(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	n := waiting("mail")
	n.Approvers = nil
	_, err := NewSender(emailConfig(srv)).Deliver(context.Background(), n)
	ae := requireRefused(t, err)
	assert.Contains(t, ae.Message(), "no recipient: ")
}

func TestEmailServerDown(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	c := emailConfig(srv, "ops@example.com")
	c.Targets[0].SMTP = "127.0.0.1:1"
	_, err := NewSender(c).Deliver(context.Background(), waiting("mail"))
	requireRetryable(t, err)
}

func TestEmailBadApproverAddress(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{User: smtpUser, Password: smtpPass})
	n := waiting("mail")
	n.Approvers[1].Email = "bob@example.com\r\nRCPT TO:<evil@x>"
	_, err := NewSender(emailConfig(srv)).Deliver(context.Background(), n)
	ae := requireRefused(t, err)
	assert.Contains(t, ae.Message(), "(not an address)")
	assert.Contains(t, ae.Message(), "sent: alice@example.com")
	msgs := srv.Messages()
	require.Len(t, msgs, 1)
	assert.Equal(t, []string{"alice@example.com"}, msgs[0].To)
}

// A server that never answers: the attempt ends at its timeout, to be
// retried.
func TestEmailTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // silent until the test ends
		}
	}()
	srv := smtptest.Start(t, smtptest.Options{})
	c := emailConfig(srv, "ops@example.com")
	c.Targets[0].SMTP, c.Targets[0].Timeout = l.Addr().String(), "300ms"
	start := time.Now()
	_, err = NewSender(c).Deliver(context.Background(), waiting("mail"))
	requireRetryable(t, err)
	assert.Less(t, time.Since(start), 3*time.Second)

	// Cancelled (the activity is), it ends at once, whatever the timeout.
	c.Targets[0].Timeout = "30s"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(200*time.Millisecond, cancel)
	start = time.Now()
	_, err = NewSender(c).Deliver(ctx, waiting("mail"))
	requireRetryable(t, err)
	assert.Less(t, time.Since(start), 3*time.Second)
}

func TestRecipients(t *testing.T) {
	n := waiting("mail")
	n.Approvers = append(n.Approvers, workflows.Recipient{Name: "alice2", Email: "ALICE@example.com"}, workflows.Recipient{Name: "carol"})
	got := recipients(Target{To: []string{"Ops <ops@example.com>", "bob@example.com", "ops@example.com"}}, n)
	assert.Equal(t, []recipient{
		{name: "alice", addr: "alice@example.com"},
		{name: "bob", addr: "bob@example.com"},
		{name: "ops@example.com", addr: "ops@example.com"},
	}, got, "approvers with an address first, then to:, each address once")
}
