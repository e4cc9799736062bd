package permit

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolgate/toolgate/signed"
)

// WorkerKeyFile is the worker key's file in a data directory (toolgate dev,
// worker and demo): one key for every worker on that directory.
// WorkerPublicKeyFile, beside it, holds its public key (signed's text form,
// "ed25519:…"): what a worker hosting tools on another task queue, in any
// language, verifies permits with.
const (
	WorkerKeyFile       = "worker.key"
	WorkerPublicKeyFile = "worker.pub"
)

// LoadOrCreateKey reads the worker key at path (signed.ReadPrivateKey: a
// PEM PKCS#8 Ed25519 key, mode 0600), making one there first if there is
// none, and writes its public key beside it (WorkerPublicKeyFile, in
// path's directory) if missing. Workers that share a task queue must load
// the same file; workers hosting its tools, the public one.
func LoadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	key, err := loadOrCreate(path)
	if err != nil {
		return nil, err
	}
	pubPath := filepath.Join(filepath.Dir(path), WorkerPublicKeyFile)
	if _, err := os.Stat(pubPath); errors.Is(err, os.ErrNotExist) {
		text := signed.FormatPublicKey(key.Public().(ed25519.PublicKey)) + "\n"
		if err := os.WriteFile(pubPath, []byte(text), 0o644); err != nil {
			return nil, fmt.Errorf("worker key: writing its public key: %w", err)
		}
	}
	return key, nil
}

// ReadPublicKeys reads worker public keys, one a line in signed's text form
// ("ed25519:…"; blank lines and lines starting with # are skipped), as a
// worker hosting tools on another task queue trusts them.
func ReadPublicKeys(path string) (Keys, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("worker public keys: %w", err)
	}
	var pubs []ed25519.PublicKey
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		pub, err := signed.ParsePublicKey(line)
		if err != nil {
			return nil, fmt.Errorf("worker public keys %s: %w", path, err)
		}
		pubs = append(pubs, pub)
	}
	if len(pubs) == 0 {
		return nil, fmt.Errorf("worker public keys %s: no key in it", path)
	}
	return NewKeys(pubs...), nil
}

func loadOrCreate(path string) (ed25519.PrivateKey, error) {
	key, err := signed.ReadPrivateKey(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		if err != nil {
			return nil, fmt.Errorf("worker key: %w", err)
		}
		return key, nil
	}
	_, key, err = signed.GenerateKey()
	if err != nil {
		return nil, fmt.Errorf("worker key: %w", err)
	}
	if err := signed.WritePrivateKey(path, key); err != nil {
		// Another process may have made it first: take that one.
		if again, rerr := signed.ReadPrivateKey(path); rerr == nil {
			return again, nil
		}
		return nil, fmt.Errorf("worker key: %w", err)
	}
	return key, nil
}
