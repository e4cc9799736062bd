// Package devtls makes a throwaway certificate authority and the server and
// client certificates it signs, so that `toolgate dev` can serve TLS with
// client certificates (mutual TLS) on one machine: a rehearsal of a
// production setup, and what toolgate's tests handshake against.
//
// The certificates are for development only: the CA key sits next to the
// certificates it signed, and anyone who can read it can mint clients.
package devtls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultClientName is the client certificate's common name when
// Options.ClientName is empty.
const DefaultClientName = "toolgate-client"

// DefaultValidity is how long the certificates are valid when
// Options.Validity is zero.
const DefaultValidity = 365 * 24 * time.Hour

// DefaultHosts are the names the server certificate is always valid for.
var DefaultHosts = []string{"127.0.0.1", "::1", "localhost"}

// File names that Generate writes in its directory.
const (
	CAFile         = "ca.pem"
	CAKeyFile      = "ca.key"
	ServerCertFile = "server.pem"
	ServerKeyFile  = "server.key"
	ClientCertFile = "client.pem"
	ClientKeyFile  = "client.key"
)

// Options configures Generate. The zero value is valid.
type Options struct {
	// Hosts are more names for the server certificate, besides DefaultHosts:
	// IP addresses (IP SANs) or DNS names (DNS SANs), e.g. the machine's
	// LAN address when clients on other machines connect.
	Hosts []string
	// ClientName is the client certificate's common name ("" means
	// DefaultClientName).
	ClientName string
	// Validity is how long all three certificates are valid from now (0
	// means DefaultValidity).
	Validity time.Duration
}

// Files are the paths Generate wrote.
type Files struct {
	Dir        string
	CA         string // the CA certificate: what servers and clients trust
	CAKey      string // the CA's private key: signs more certificates; keep it
	ServerCert string // the server certificate (server auth), for the hosts
	ServerKey  string
	ClientCert string // the client certificate (client auth)
	ClientKey  string
}

// names are the Files of dir.
func names(dir string) Files {
	j := func(name string) string { return filepath.Join(dir, name) }
	return Files{
		Dir: dir, CA: j(CAFile), CAKey: j(CAKeyFile),
		ServerCert: j(ServerCertFile), ServerKey: j(ServerKeyFile),
		ClientCert: j(ClientCertFile), ClientKey: j(ClientKeyFile),
	}
}

func (f Files) all() []string {
	return []string{f.CA, f.CAKey, f.ServerCert, f.ServerKey, f.ClientCert, f.ClientKey}
}

// Generate writes in dir (created 0700 if missing) a new CA (ca.pem,
// ca.key), a server certificate for DefaultHosts and opts.Hosts (server.pem,
// server.key) and a client certificate (client.pem, client.key), both signed
// by the CA: ECDSA P-256 keys, files 0600. It refuses (and writes nothing)
// when any of the six files exists already; on a later error it removes
// what it wrote.
func Generate(dir string, opts Options) (_ Files, err error) {
	if dir == "" {
		return Files{}, errors.New("devtls: no directory")
	}
	f := names(dir)
	validity := opts.Validity
	if validity == 0 {
		validity = DefaultValidity
	}
	if validity < 0 {
		return Files{}, fmt.Errorf("devtls: validity %v is negative", validity)
	}
	clientName := opts.ClientName
	if clientName == "" {
		clientName = DefaultClientName
	}
	var ips []net.IP
	var dnsNames []string
	seen := map[string]bool{}
	for _, h := range append(append([]string{}, DefaultHosts...), opts.Hosts...) {
		h = strings.TrimSpace(h)
		h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]") // [::1]
		if h == "" || seen[strings.ToLower(h)] {
			continue
		}
		seen[strings.ToLower(h)] = true
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else if validDNSName(h) {
			dnsNames = append(dnsNames, strings.ToLower(h))
		} else {
			return Files{}, fmt.Errorf("devtls: host %q is neither an IP address nor a DNS name", h)
		}
	}

	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, fmt.Errorf("devtls: %w", err)
	}
	for _, p := range f.all() {
		if _, err := os.Lstat(p); err == nil {
			return Files{}, fmt.Errorf("devtls: %s exists: refusing to overwrite (remove the directory's certificates first, or pick another directory)", p)
		} else if !errors.Is(err, os.ErrNotExist) {
			return Files{}, fmt.Errorf("devtls: %w", err)
		}
	}

	var written []string
	defer func() {
		if err != nil {
			for _, p := range written {
				_ = os.Remove(p)
			}
		}
	}()
	write := func(path, blockType string, der []byte) error {
		out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("devtls: %w", err)
		}
		written = append(written, path)
		if err := pem.Encode(out, &pem.Block{Type: blockType, Bytes: der}); err != nil {
			_ = out.Close()
			return fmt.Errorf("devtls: write %s: %w", path, err)
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("devtls: write %s: %w", path, err)
		}
		return os.Chmod(path, 0o600) // whatever the umask
	}
	writePair := func(certPath, keyPath string, cert []byte, key *ecdsa.PrivateKey) error {
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return fmt.Errorf("devtls: %w", err)
		}
		if err := write(keyPath, "PRIVATE KEY", keyDER); err != nil {
			return err
		}
		return write(certPath, "CERTIFICATE", cert)
	}

	now := time.Now()
	notBefore, notAfter := now.Add(-time.Hour), now.Add(validity) // an hour of clock skew
	caKey, err := newKey()
	if err != nil {
		return Files{}, err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "toolgate dev CA", Organization: []string{"toolgate dev"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, caCert, err := sign(caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return Files{}, err
	}
	if err := writePair(f.CA, f.CAKey, caDER, caKey); err != nil {
		return Files{}, err
	}

	leaf := func(cn string, usage x509.ExtKeyUsage) *x509.Certificate {
		return &x509.Certificate{
			Subject:     pkix.Name{CommonName: cn, Organization: []string{"toolgate dev"}},
			NotBefore:   notBefore,
			NotAfter:    notAfter,
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
	}
	serverTmpl := leaf("toolgate dev server", x509.ExtKeyUsageServerAuth)
	serverTmpl.IPAddresses, serverTmpl.DNSNames = ips, dnsNames
	clientTmpl := leaf(clientName, x509.ExtKeyUsageClientAuth)
	for _, p := range []struct {
		tmpl          *x509.Certificate
		cert, keyPath string
	}{{serverTmpl, f.ServerCert, f.ServerKey}, {clientTmpl, f.ClientCert, f.ClientKey}} {
		key, err := newKey()
		if err != nil {
			return Files{}, err
		}
		der, _, err := sign(p.tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return Files{}, err
		}
		if err := writePair(p.cert, p.keyPath, der, key); err != nil {
			return Files{}, err
		}
	}
	return f, nil
}

func newKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("devtls: generate key: %w", err)
	}
	return k, nil
}

// sign makes tmpl a certificate signed by parent's key, with a random serial.
func sign(tmpl, parent *x509.Certificate, pub any, parentKey *ecdsa.PrivateKey) ([]byte, *x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("devtls: serial: %w", err)
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("devtls: sign %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("devtls: %w", err)
	}
	return der, cert, nil
}

// validDNSName reports whether h is a plausible DNS name (letters, digits,
// hyphens, dots; a leading "*." wildcard allowed).
func validDNSName(h string) bool {
	h = strings.TrimPrefix(h, "*.")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}
