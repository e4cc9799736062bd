package devtls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	block, rest := pem.Decode(b)
	require.NotNil(t, block, path)
	require.Equal(t, "CERTIFICATE", block.Type)
	require.Empty(t, rest)
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return c
}

func TestGenerateChainVerifies(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	f, err := Generate(dir, Options{Hosts: []string{"10.1.2.3", "Build.Example", "localhost"}, ClientName: "alice", Validity: 48 * time.Hour})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "ca.pem"), f.CA)
	assert.Equal(t, filepath.Join(dir, "server.key"), f.ServerKey)
	assert.Equal(t, filepath.Join(dir, "client.pem"), f.ClientCert)

	ca := readCert(t, f.CA)
	assert.True(t, ca.IsCA)
	pool := x509.NewCertPool()
	pool.AddCert(ca)

	srv := readCert(t, f.ServerCert)
	for _, host := range []string{"127.0.0.1", "::1", "localhost", "10.1.2.3", "build.example"} {
		_, err := srv.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		assert.NoError(t, err, "server certificate for %s", host)
	}
	_, err = srv.Verify(x509.VerifyOptions{Roots: pool, DNSName: "other.example", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	assert.Error(t, err, "server certificate is not for other hosts")
	_, err = srv.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.Error(t, err, "server certificate is no client certificate")
	assert.Len(t, srv.IPAddresses, 3, "127.0.0.1, ::1, 10.1.2.3 (no duplicates)")
	assert.Equal(t, []string{"localhost", "build.example"}, srv.DNSNames)

	cl := readCert(t, f.ClientCert)
	_, err = cl.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.NoError(t, err, "client certificate")
	_, err = cl.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	assert.Error(t, err, "client certificate is no server certificate")
	assert.Equal(t, "alice", cl.Subject.CommonName)
	assert.WithinDuration(t, time.Now().Add(48*time.Hour), cl.NotAfter, time.Minute)

	// Another CA's pool does not verify them.
	other, err := Generate(filepath.Join(t.TempDir(), "other"), Options{})
	require.NoError(t, err)
	otherPool := x509.NewCertPool()
	otherPool.AddCert(readCert(t, other.CA))
	_, err = cl.Verify(x509.VerifyOptions{Roots: otherPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.Error(t, err)

	// The keys are P-256 and match their certificates.
	for _, p := range [][2]string{{f.CA, f.CAKey}, {f.ServerCert, f.ServerKey}, {f.ClientCert, f.ClientKey}} {
		pair, err := tls.LoadX509KeyPair(p[0], p[1])
		require.NoError(t, err, p[0])
		k, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		require.True(t, ok)
		assert.Equal(t, elliptic.P256(), k.Curve)
	}
	assert.Equal(t, DefaultClientName, readCert(t, other.ClientCert).Subject.CommonName)
}

func TestGenerateFileModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	dir := filepath.Join(t.TempDir(), "a", "tls")
	f, err := Generate(dir, Options{})
	require.NoError(t, err)
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), dir)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), e.Name())
	}
	assert.ElementsMatch(t, []string{"ca.pem", "ca.key", "server.pem", "server.key", "client.pem", "client.key"}, got)
	assert.Len(t, f.all(), 6)
}

func TestGenerateRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	f, err := Generate(dir, Options{})
	require.NoError(t, err)
	before := map[string][]byte{}
	for _, p := range f.all() {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		before[p] = b
	}
	_, err = Generate(dir, Options{})
	require.ErrorContains(t, err, "refusing to overwrite")
	for p, b := range before {
		now, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, b, now, "%s unchanged", p)
	}

	// One file in the way is enough, and nothing else is written.
	dir2 := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir2, ClientKeyFile), []byte("mine"), 0o600))
	_, err = Generate(dir2, Options{})
	require.ErrorContains(t, err, "refusing to overwrite")
	entries, err := os.ReadDir(dir2)
	require.NoError(t, err)
	assert.Len(t, entries, 1)
}

func TestGenerateRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{{Hosts: []string{"not a host"}}, {Hosts: []string{"http://x"}}, {Validity: -time.Hour}} {
		dir := filepath.Join(t.TempDir(), "tls")
		_, err := Generate(dir, o)
		assert.Error(t, err, "%+v", o)
		_, statErr := os.Stat(dir)
		assert.True(t, os.IsNotExist(statErr), "nothing made for %+v", o)
	}
	_, err := Generate("", Options{})
	assert.Error(t, err)
	f, err := Generate(t.TempDir(), Options{Hosts: []string{"[::2]", " 192.168.1.9 "}})
	require.NoError(t, err)
	ips := readCert(t, f.ServerCert).IPAddresses
	assert.True(t, slices.ContainsFunc(ips, func(ip net.IP) bool { return ip.Equal(net.ParseIP("::2")) }))
	assert.True(t, slices.ContainsFunc(ips, func(ip net.IP) bool { return ip.Equal(net.ParseIP("192.168.1.9")) }))
}
