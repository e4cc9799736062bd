package smtptest

import (
	"crypto/tls"
	"crypto/x509"
	"net/smtp"
	"net/textproto"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func client(t *testing.T, s *Server) *smtp.Client {
	t.Helper()
	c, err := smtp.Dial(s.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// starttls is a client of s that has started TLS, trusting s's CA.
func starttls(t *testing.T, s *Server) *smtp.Client {
	t.Helper()
	c := client(t, s)
	ok, _ := c.Extension("STARTTLS")
	require.True(t, ok)
	pem, err := os.ReadFile(s.CAFile())
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	require.NoError(t, c.StartTLS(&tls.Config{ServerName: "127.0.0.1", RootCAs: pool, MinVersion: tls.VersionTLS12}))
	return c
}

func TestServer(t *testing.T) {
	s := Start(t, Options{User: "u", Password: "p", RefuseRcpt: []string{"no@example.com"}})
	bad := starttls(t, s)
	require.Error(t, bad.Auth(smtp.PlainAuth("", "u", "wrong", "127.0.0.1")))

	c := starttls(t, s)
	require.Error(t, c.Mail("a@example.com"), "mail before AUTH is refused")
	require.NoError(t, c.Reset())
	require.NoError(t, c.Auth(smtp.PlainAuth("", "u", "p", "127.0.0.1")))
	assert.Equal(t, []string{"u", "u"}, s.Auths())

	require.NoError(t, c.Mail("a@example.com"))
	err := c.Rcpt("no@example.com")
	var te *textproto.Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, 550, te.Code)
	require.NoError(t, c.Rcpt("b@example.com"))
	w, err := c.Data()
	require.NoError(t, err)
	_, err = w.Write([]byte("Subject: hi\r\n\r\nbody\r\n"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, c.Quit())

	msgs := s.Messages()
	require.Len(t, msgs, 1)
	assert.Equal(t, "a@example.com", msgs[0].From)
	assert.Equal(t, []string{"b@example.com"}, msgs[0].To)
	assert.Equal(t, "u", msgs[0].User)
	assert.Equal(t, "Subject: hi\r\n\r\nbody\r\n", string(msgs[0].Data))
}

func TestServerNoSTARTTLS(t *testing.T) {
	s := Start(t, Options{User: "u", Password: "p", NoSTARTTLS: true})
	c := client(t, s)
	ok, _ := c.Extension("STARTTLS")
	assert.False(t, ok)
	ok, mechs := c.Extension("AUTH")
	assert.True(t, ok, "AUTH offered in plaintext: a client must refuse it itself")
	assert.Equal(t, "PLAIN", mechs)
}
