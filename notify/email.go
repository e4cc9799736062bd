package notify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/toolgate/toolgate/workflows"
)

// recipient is one address a message goes to, and who it is for (the
// approver's name, or the address of a to: recipient).
type recipient struct {
	name, addr string
}

// recipients are n's approvers that have an address, then t's to:, each
// address once.
func recipients(t Target, n workflows.Notification) []recipient {
	var out []recipient
	seen := map[string]bool{}
	add := func(name, addr string) {
		key := strings.ToLower(strings.TrimSpace(addr))
		if key == "" || seen[key] {
			return
		}
		seen[key] = true
		out = append(out, recipient{name: name, addr: addr})
	}
	for _, a := range n.Approvers {
		add(a.Name, a.Email)
	}
	return append(out, toRecipients(t, seen)...)
}

// toRecipients are t's to: addresses, bare, each once (seen: those already
// taken).
func toRecipients(t Target, seen map[string]bool) []recipient {
	var out []recipient
	for _, s := range t.To {
		addr := s
		if a, err := mail.ParseAddress(s); err == nil {
			addr = a.Address // "Ops <ops@example.com>": ops@example.com
		}
		key := strings.ToLower(addr)
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, recipient{name: addr, addr: addr})
	}
	return out
}

// sendEmail sends n to each recipient (to, or those of recipients), one
// message each with its own link, over one STARTTLS connection.
func (s *Sender) sendEmail(ctx context.Context, t Target, n workflows.Notification, key string, to []recipient, lg *linkLog) (string, error) {
	if to == nil {
		to = recipients(t, n)
	}
	if len(to) == 0 {
		return "", refused("no recipient: none of the call's approvers has an email, and the target has no to: addresses")
	}
	from, err := mail.ParseAddress(t.From)
	if err != nil {
		return "", refused("from %q: %v", t.From, err)
	}
	var sent, refusedTo []string
	var good []recipient
	var msgs [][]byte
	for _, r := range to {
		if a, err := mail.ParseAddress(r.addr); err != nil || a.Address != r.addr {
			refusedTo = append(refusedTo, fmt.Sprintf("%.80q (not an address)", r.addr))
			continue
		}
		link, err := s.linkFor(lg, n, r.name, KindEmail)
		if err != nil {
			return "", err
		}
		good = append(good, r)
		msgs = append(msgs, emailMessage(n, from, r, key, link.URL, s.now()))
	}
	if len(good) == 0 {
		return "", refused("no recipient: %s", strings.Join(refusedTo, ", "))
	}

	c, stop, err := s.dialSMTP(ctx, t)
	if err != nil {
		return "", err
	}
	defer stop()
	defer c.Close()
	var retry bool
	for i, r := range good {
		err := sendOne(c, from.Address, r.addr, msgs[i])
		if err == nil {
			sent = append(sent, r.addr)
			continue
		}
		var te *textproto.Error
		if !errors.As(err, &te) { // the connection broke: no point going on
			return "", failed("after %d of %d messages (sent: %s): %v", len(sent), len(good), orNone(sent), err)
		}
		retry = retry || te.Code < 500
		refusedTo = append(refusedTo, fmt.Sprintf("%s (%d %s)", r.addr, te.Code, oneLine(te.Msg)))
		if err := c.Reset(); err != nil {
			return "", failed("RSET after %s: %v", r.addr, err)
		}
	}
	_ = c.Quit()
	if len(refusedTo) > 0 {
		msg := fmt.Sprintf("not sent to %s; sent: %s", strings.Join(refusedTo, ", "), orNone(sent))
		if retry {
			return "", failed("%s", msg)
		}
		return "", refused("%s", msg)
	}
	word := "messages"
	if len(sent) == 1 {
		word = "message"
	}
	return fmt.Sprintf("%d %s: %s", len(sent), word, strings.Join(sent, ", ")), nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// sendOne sends one message to one address on c.
func sendOne(c *smtp.Client, from, to string, msg []byte) error {
	if err := c.Mail(from); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	return w.Close()
}

// dialSMTP connects to t's server within the attempt timeout (and ctx),
// requires STARTTLS before anything else is said, and authenticates. Until
// stop is called, cancelling ctx (the activity's) ends the conversation.
func (s *Sender) dialSMTP(ctx context.Context, t Target) (*smtp.Client, func() bool, error) {
	host, _, err := splitHostPort(t.SMTP)
	if err != nil {
		return nil, nil, refused("smtp %q: want HOST:PORT", t.SMTP)
	}
	tlsConf := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, nil, refused("ca_file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, refused("ca_file %s: no PEM certificate in it", t.CAFile)
		}
		tlsConf.RootCAs = pool
	}
	dialCtx, cancel := context.WithTimeout(ctx, t.AttemptTimeout())
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(dialCtx, "tcp", t.SMTP)
	if err != nil {
		return nil, nil, failed("connect to %s: %v", t.SMTP, err)
	}
	deadline, _ := dialCtx.Deadline()
	_ = conn.SetDeadline(deadline) // the whole conversation, not each step
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		stop()
		conn.Close()
		return nil, nil, smtpError("greeting", err)
	}
	ok := false
	defer func() {
		if !ok {
			stop()
			c.Close()
		}
	}()
	if err := c.Hello("localhost"); err != nil {
		return nil, nil, smtpError("EHLO", err)
	}
	if has, _ := c.Extension("STARTTLS"); !has {
		return nil, nil, refused("%s does not offer STARTTLS: refusing to send credentials or mail in plaintext", t.SMTP)
	}
	if err := c.StartTLS(tlsConf); err != nil {
		var cv *tls.CertificateVerificationError
		if errors.As(err, &cv) {
			return nil, nil, refused("STARTTLS: %v", err)
		}
		return nil, nil, smtpError("STARTTLS", err)
	}
	if t.User != "" {
		if err := c.Auth(smtp.PlainAuth("", t.User, t.Password, host)); err != nil {
			return nil, nil, smtpError("AUTH", err)
		}
	}
	ok = true
	return c, stop, nil
}

// smtpError classes a server's answer: 5xx refused, anything else failed.
func smtpError(step string, err error) error {
	var te *textproto.Error
	if errors.As(err, &te) && te.Code >= 500 {
		return refused("%s: %d %s", step, te.Code, oneLine(te.Msg))
	}
	return failed("%s: %v", step, err)
}

// oneLine is s with control characters (CR, LF) replaced by spaces.
func oneLine(s string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?")))
}

// headerValue is s fit for a header: no control characters (no header of
// its own can be injected), non-ASCII encoded (RFC 2047).
func headerValue(s string) string {
	return mime.QEncoding.Encode("utf-8", oneLine(s))
}

// emailSubject is the subject line of n.
func emailSubject(n workflows.Notification) string {
	call := strings.TrimSpace(n.Tool + " " + n.CallID)
	switch n.Event {
	case workflows.NotifyWaiting:
		return fmt.Sprintf("[toolgate] %s waits for your decision — run %s", call, n.WorkflowID)
	case workflows.NotifyDecided:
		s := fmt.Sprintf("[toolgate] %s %s", call, orDash(n.Decision))
		if n.By != "" {
			s += " by " + n.By
		}
		return s + " — run " + n.WorkflowID
	case workflows.NotifyExpired:
		return fmt.Sprintf("[toolgate] %s expired without a decision — run %s", call, n.WorkflowID)
	case workflows.NotifyBlocked:
		return fmt.Sprintf("[toolgate] run %s blocked at %s", n.WorkflowID, orDash(call))
	case workflows.NotifyFailed:
		return fmt.Sprintf("[toolgate] run %s failed", n.WorkflowID)
	case EventTest:
		return "[toolgate] test message"
	}
	return fmt.Sprintf("[toolgate] run %s: %s", n.WorkflowID, n.Event)
}

func emailMention(a workflows.Recipient) string {
	if a.Email != "" {
		return a.Name + " <" + a.Email + ">"
	}
	return a.Name
}

// emailBody is the plain text of n's message, with link for a waiting call.
func emailBody(n workflows.Notification, link string) string {
	var b strings.Builder
	if n.Event == EventTest {
		fmt.Fprintf(&b, "toolgate test message from notify target %s at %s.\n", n.Target, n.At.UTC().Format(time.RFC3339))
		return b.String()
	}
	b.WriteString(headline(n) + "\n\n")
	for _, f := range facts(n, func(s string) string { return s }, emailMention) {
		fmt.Fprintf(&b, "%s: %s\n", f.label, f.value)
	}
	if len(n.Args) > 0 && n.Event == workflows.NotifyWaiting {
		b.WriteString("\nArguments:\n" + clip(string(n.Args), 16<<10, "… (clipped)") + "\n")
	}
	if link != "" {
		b.WriteString("\nOpen this link to decide (opening it decides nothing; the page asks you to confirm): " + link + "\n")
	}
	return b.String()
}

// emailMessage is the whole message of n to r: headers and a
// quoted-printable body.
func emailMessage(n workflows.Notification, from *mail.Address, r recipient, key, link string, now time.Time) []byte {
	sum := sha256.Sum256([]byte(key + r.addr))
	to := mail.Address{Address: oneLine(r.addr)}
	if r.name != r.addr {
		to.Name = oneLine(r.name)
	}
	var b bytes.Buffer
	header := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	header("From", from.String())
	header("To", to.String())
	header("Subject", headerValue(emailSubject(n)))
	header("Date", now.Format(time.RFC1123Z))
	header("Message-ID", "<"+hex.EncodeToString(sum[:8])+"@toolgate>")
	header("Idempotency-Key", headerValue(key))
	header("X-Toolgate-Event", headerValue(n.Event))
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	w := quotedprintable.NewWriter(&b)
	_, _ = w.Write([]byte(strings.ReplaceAll(emailBody(n, link), "\n", "\r\n")))
	_ = w.Close()
	return b.Bytes()
}
