package main

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeysTLS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	out, _, err := runKeys(t, "tls", dir, "--host", "10.0.0.7", "--host", "build.example,ci.example", "--client-name", "ci")
	require.NoError(t, err)
	j := func(name string) string { return filepath.Join(dir, name) }
	assert.Contains(t, out, "toolgate dev --tls-cert "+j("server.pem")+" --tls-key "+j("server.key")+" --tls-client-ca "+j("ca.pem")+"\n")
	assert.Contains(t, out, "--tls-ca "+j("ca.pem")+" --tls-cert "+j("client.pem")+" --tls-key "+j("client.key")+"\n")
	assert.Contains(t, out, "for 127.0.0.1, ::1, localhost, 10.0.0.7, build.example, ci.example")

	b, err := os.ReadFile(j("server.pem"))
	require.NoError(t, err)
	block, _ := pem.Decode(b)
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	assert.Equal(t, []string{"localhost", "build.example", "ci.example"}, cert.DNSNames)
	assert.Len(t, cert.IPAddresses, 3)

	_, _, err = runKeys(t, "tls", dir)
	require.ErrorContains(t, err, "refusing to overwrite")
	_, _, err = runKeys(t, "tls")
	require.ErrorContains(t, err, "usage: toolgate keys tls DIR")
	_, _, err = runKeys(t, "bogus")
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "keys tls DIR"))
}
