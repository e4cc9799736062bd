package signed

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
)

// pemType is the PEM block type of a private key file (PKCS#8).
const pemType = "PRIVATE KEY"

// maxKeyFileBytes bounds what ReadPrivateKey reads; a key file is ~120 bytes.
const maxKeyFileBytes = 64 << 10

// GenerateKey makes an Ed25519 key pair from crypto/rand.
func GenerateKey() (ed25519.PublicKey, ed25519.PrivateKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	return pub, priv, nil
}

// EncodePrivateKey is priv as a key file holds it: a PEM "PRIVATE KEY"
// (PKCS#8) block, which ReadPrivateKey reads and the inbox's page loads.
func EncodePrivateKey(priv ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemType, Bytes: der}), nil
}

// WritePrivateKey writes priv as a PEM "PRIVATE KEY" (PKCS#8) block to path,
// mode 0600. It creates the file exclusively: it never overwrites an existing
// file. It creates path's directory, mode 0700, if missing.
func WritePrivateKey(path string, priv ed25519.PrivateKey) (err error) {
	if len(priv) != ed25519.PrivateKeySize {
		return fmt.Errorf("write key %s: private key of %d bytes, want %d", path, len(priv), ed25519.PrivateKeySize)
	}
	block, err := EncodePrivateKey(priv)
	if err != nil {
		return fmt.Errorf("write key %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("write key: %s exists; refusing to overwrite a key (remove it first if you mean to)", path)
		}
		return fmt.Errorf("write key: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write key: %w", cerr)
		}
		if err != nil {
			os.Remove(path) // ours: created exclusively above
		}
	}()
	if runtime.GOOS != "windows" {
		// 0600 whatever the umask (which can only have made it stricter).
		if err := f.Chmod(0o600); err != nil {
			return fmt.Errorf("write key: %w", err)
		}
	}
	if _, err := f.Write(block); err != nil {
		return fmt.Errorf("write key: %w", err)
	}
	return nil
}

// ReadPrivateKey reads a private key file as WritePrivateKey writes it. On
// systems with Unix permissions it refuses a file readable or writable by
// group or others (mode & 0o077 != 0).
//
// It is how the CLI loads an approver's key (--as NAME --key FILE).
func ReadPrivateKey(path string) (ed25519.PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read key %s: not a regular file", path)
	}
	if runtime.GOOS != "windows" && runtime.GOOS != "plan9" && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("read key %s: mode %04o lets group or others at a private key; run `chmod 600 %s`", path, fi.Mode().Perm(), path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	if len(data) > maxKeyFileBytes {
		return nil, fmt.Errorf("read key %s: over %d bytes, not a key file", path, maxKeyFileBytes)
	}
	block, rest := pem.Decode(data)
	if block == nil || block.Type != pemType {
		return nil, fmt.Errorf("read key %s: no PEM %q block (toolgate keys new writes one)", path, pemType)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("read key %s: data after the PEM block", path)
	}
	if len(block.Headers) != 0 {
		return nil, fmt.Errorf("read key %s: PEM headers (encrypted keys are not supported)", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("read key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("read key %s: a %T, want an Ed25519 key", path, k)
	}
	return priv, nil
}
