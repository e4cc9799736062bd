// Package encryption is toolgate's payload encryption: a key file of
// AES-256 keys (a Keyring), a Temporal payload codec that seals every
// payload with AES-256-GCM under the newest key and opens it with any key
// of the file (so keys rotate without downtime), and the data and failure
// converters a client or worker uses with it.
//
// Search attributes are never encrypted: the SDK does not pass them through
// a codec, and the server must read them to list runs.
package encryption

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/toolgate/toolgate/internal/private"
)

// KeySize is the size of an AES-256 key in bytes.
const KeySize = 32

// maxKeyFileBytes bounds a key file: thousands of keys, not a stray big file.
const maxKeyFileBytes = 1 << 20

// maxIDLen bounds a key id (keyID).
const maxIDLen = 64

// keyID is what a key id may look like: it goes into every payload's metadata.
var keyID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// keyFile is the JSON form of a key file; its newest key is the last.
type keyFile struct {
	Keys []fileKey `json:"keys"`
}

// fileKey is one key of a key file.
type fileKey struct {
	ID      string `json:"id"`
	Key     string `json:"key"`               // base64 (standard, padded) of KeySize bytes
	Created string `json:"created,omitempty"` // RFC 3339
}

// Keyring is the keys of one key file: the newest encrypts, any decrypts.
type Keyring struct {
	path  string
	ids   []string // oldest first: the file's order
	aeads map[string]cipher.AEAD
}

// LoadKeyring reads the key file at path. It refuses a file that is not a
// regular file (a symlink too), one whose mode lets group or others at it
// (on Unix), and any file that is not a valid key file: unknown JSON
// fields, no keys, an empty, malformed or repeated id, a key that is not
// base64 of 32 bytes, a created time that is not RFC 3339. Every error
// names the file and says why.
func LoadKeyring(path string) (*Keyring, error) {
	kf, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	return newKeyring(path, kf)
}

// readKeyFile reads and checks the file at path (private.ReadFile), up to the
// keys' contents.
func readKeyFile(path string) (*keyFile, error) {
	data, err := private.ReadFile(path, maxKeyFileBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("encryption key file %s: no such file (create one with `toolgate keys encryption %s`)", path, path)
		}
		return nil, fmt.Errorf("encryption key file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var kf keyFile
	if err := dec.Decode(&kf); err != nil {
		return nil, fmt.Errorf("encryption key file %s: not a key file (want JSON {\"keys\":[{\"id\":…,\"key\":…,\"created\":…}]}): %w", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("encryption key file %s: not a key file: data after the JSON object", path)
	}
	return &kf, nil
}

// newKeyring checks kf's keys and makes their ciphers.
func newKeyring(path string, kf *keyFile) (*Keyring, error) {
	if len(kf.Keys) == 0 {
		return nil, fmt.Errorf("encryption key file %s: no keys (add one with `toolgate keys encryption %s`)", path, path)
	}
	k := &Keyring{path: path, aeads: make(map[string]cipher.AEAD, len(kf.Keys))}
	for i, fk := range kf.Keys {
		if fk.ID == "" {
			return nil, fmt.Errorf("encryption key file %s: key %d has an empty id", path, i+1)
		}
		if !keyID.MatchString(fk.ID) {
			return nil, fmt.Errorf("encryption key file %s: key %d: id %.80q: want 1 to 64 of A-Z a-z 0-9 . _ - starting with a letter or digit", path, i+1, fk.ID)
		}
		if _, dup := k.aeads[fk.ID]; dup {
			return nil, fmt.Errorf("encryption key file %s: key id %q appears twice; ids must be unique", path, fk.ID)
		}
		raw, err := base64.StdEncoding.DecodeString(fk.Key)
		if err != nil {
			return nil, fmt.Errorf("encryption key file %s: key %q: not base64: %v", path, fk.ID, err)
		}
		if len(raw) != KeySize {
			return nil, fmt.Errorf("encryption key file %s: key %q is %d bytes, want %d (AES-256)", path, fk.ID, len(raw), KeySize)
		}
		if fk.Created != "" {
			if _, err := time.Parse(time.RFC3339, fk.Created); err != nil {
				return nil, fmt.Errorf("encryption key file %s: key %q: created %.40q is not an RFC 3339 time", path, fk.ID, fk.Created)
			}
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("encryption key file %s: key %q: %w", path, fk.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("encryption key file %s: key %q: %w", path, fk.ID, err)
		}
		k.ids = append(k.ids, fk.ID)
		k.aeads[fk.ID] = aead
	}
	return k, nil
}

// Path is the key file the keyring was loaded from.
func (k *Keyring) Path() string { return k.path }

// IDs are the keyring's key ids, oldest first (the newest last).
func (k *Keyring) IDs() []string { return append([]string(nil), k.ids...) }

// Newest is the id of the key that encrypts: the file's last.
func (k *Keyring) Newest() string { return k.ids[len(k.ids)-1] }

// Has says whether the keyring holds the key with this id.
func (k *Keyring) Has(id string) bool {
	_, ok := k.aeads[id]
	return ok
}

// AddKey adds a new random key to the key file at path, as its newest, and
// returns its id. Without a file there it creates one (mode 0600, and its
// directory, mode 0700, if missing) holding the one key, and says so
// (created). An existing file must load as LoadKeyring loads it; it is
// replaced atomically (a temporary file in the same directory, renamed), so
// a reader sees the old keys or the new ones, never half a file.
func AddKey(path string) (id string, created bool, err error) {
	var kf *keyFile
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return "", false, fmt.Errorf("encryption key file %s: %w", path, err)
		}
		kf, created = &keyFile{}, true
	} else {
		if kf, err = readKeyFile(path); err != nil {
			return "", false, err
		}
		if _, err := newKeyring(path, kf); err != nil {
			return "", false, err
		}
	}
	now := time.Now().UTC()
	taken := make(map[string]bool, len(kf.Keys))
	for _, fk := range kf.Keys {
		taken[fk.ID] = true
	}
	for id == "" || taken[id] {
		var r [2]byte
		if _, err := rand.Read(r[:]); err != nil {
			return "", false, err
		}
		id = "k-" + now.Format("20060102") + "-" + hex.EncodeToString(r[:])
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return "", false, err
	}
	kf.Keys = append(kf.Keys, fileKey{ID: id, Key: base64.StdEncoding.EncodeToString(key), Created: now.Format(time.RFC3339)})
	data, err := json.MarshalIndent(kf, "", "  ")
	if err != nil {
		return "", false, err
	}
	if err := private.WriteFile(path, append(data, '\n')); err != nil {
		return "", false, err
	}
	return id, created, nil
}
