package mcpserve

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/private"
	"github.com/toolgate/toolgate/signed"
)

// TokenPrefix starts every token NewToken makes.
const TokenPrefix = "tg_"

// Bounds of a tokens file.
const (
	// MaxTokensFileBytes bounds what LoadTokens reads.
	MaxTokensFileBytes = 1 << 20
	// MaxTokens bounds the entries of a tokens file.
	MaxTokens = 1000
	// maxBearerBytes bounds a bearer token taken from a request; a token
	// NewToken makes has 46 bytes.
	maxBearerBytes = 256
)

// namePattern is what a token's name (the caller) may be: it becomes part of
// the workflow id of the caller's runs and the requester of signed starts.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// Entry is one token of a tokens file: whose it is and the SHA-256 of the
// token (never the token itself).
type Entry struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	// KeyFile, if set, is the path of Name's signing key (toolgate keys
	// new): with a worker policy, the runs of this token's sessions are
	// started signed by Name with it.
	KeyFile string    `json:"key_file,omitempty"`
	Created time.Time `json:"created"`
}

// tokensFile is the file's JSON form.
type tokensFile struct {
	Tokens []Entry `json:"tokens"`
}

// Tokens are the bearer tokens an MCP server over HTTP accepts, loaded from
// a tokens file (LoadTokens).
type Tokens struct {
	file    string
	entries []Entry
	hashes  [][]byte // hashes[i] is entries[i].SHA256 decoded
}

// File is the path the tokens were loaded from.
func (t *Tokens) File() string { return t.file }

// Entries are the tokens' entries, in file order.
func (t *Tokens) Entries() []Entry { return append([]Entry(nil), t.entries...) }

// LoadTokens reads a tokens file. The file must be kept private (a regular
// file only its owner may read or write: `chmod 600 FILE`); every entry
// needs a valid name, unique, and the hex SHA-256 of its token.
func LoadTokens(file string) (*Tokens, error) {
	data, err := private.ReadFile(file, MaxTokensFileBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("tokens file %s does not exist: make a token with `toolgate mcp token new NAME --tokens %s`", file, file)
		}
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	return parseTokens(file, data)
}

func parseTokens(file string, data []byte) (*Tokens, error) {
	var tf tokensFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tf); err != nil {
		return nil, fmt.Errorf("tokens file %s: want {\"tokens\":[{\"name\",\"sha256\",\"key_file\",\"created\"}]}: %w", file, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("tokens file %s: data after the JSON object", file)
	}
	if len(tf.Tokens) > MaxTokens {
		return nil, fmt.Errorf("tokens file %s: %d tokens, at most %d", file, len(tf.Tokens), MaxTokens)
	}
	t := &Tokens{file: file}
	for i, e := range tf.Tokens {
		if err := checkName(e.Name); err != nil {
			return nil, fmt.Errorf("tokens file %s: entry %d: %w", file, i+1, err)
		}
		h, err := hex.DecodeString(e.SHA256)
		if err != nil || len(h) != sha256.Size {
			return nil, fmt.Errorf("tokens file %s: token %s: sha256 must be %d hex digits (the SHA-256 of the token), not the token itself", file, e.Name, 2*sha256.Size)
		}
		for _, o := range t.entries {
			if err := clash(o.Name, e.Name); err != nil {
				return nil, fmt.Errorf("tokens file %s: %w", file, err)
			}
		}
		t.entries = append(t.entries, e)
		t.hashes = append(t.hashes, h)
	}
	if len(t.entries) == 0 {
		return nil, fmt.Errorf("tokens file %s holds no token: make one with `toolgate mcp token new NAME --tokens %s`", file, file)
	}
	return t, nil
}

// checkName says what is wrong with a token's name, if anything.
func checkName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("token name %.80q: want 1 to 64 letters, digits, '.', '_', '@' or '-', starting with a letter or digit", name)
	}
	return nil
}

// clash refuses two names of one file that are the same, or one of which
// is the other followed by '-': a run's workflow id is
// mcp-<name>-<run name>, so token "a" with run "b-x" and token "a-b" with
// run "x" would reach the same run.
func clash(a, b string) error {
	switch {
	case strings.EqualFold(a, b):
		return fmt.Errorf("two tokens named %s: a name names one caller", b)
	case strings.HasPrefix(b, a+"-"), strings.HasPrefix(a, b+"-"):
		return fmt.Errorf("tokens %s and %s: one name may not be the other followed by '-' (their runs' workflow ids, mcp-NAME-RUN, could be the same); rename one", a, b)
	}
	return nil
}

// Lookup finds the entry of a bearer token. It hashes the token and compares
// the hash with every entry's in constant time, whether or not one matched.
func (t *Tokens) Lookup(bearer string) (Entry, bool) {
	if t == nil || len(bearer) > maxBearerBytes {
		return Entry{}, false
	}
	sum := sha256.Sum256([]byte(bearer))
	found := -1
	for i, h := range t.hashes {
		if subtle.ConstantTimeCompare(sum[:], h) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Entry{}, false
	}
	return t.entries[found], true
}

// NewToken makes a token for name and stores its SHA-256 in the tokens file
// (created 0600, with its directory 0700, if missing; an entry of the same
// name is replaced, and its old token stops working). keyFile, if not
// empty, is name's signing key, checked now and stored as an absolute path.
// The token is returned once and is not kept anywhere: show it to its owner.
func NewToken(file, name, keyFile string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	if keyFile != "" {
		abs, err := filepath.Abs(keyFile)
		if err != nil {
			return "", fmt.Errorf("key file %s: %w", keyFile, err)
		}
		if _, err := signed.ReadPrivateKey(abs); err != nil {
			return "", fmt.Errorf("token %s: %w", name, err)
		}
		keyFile = abs
	}
	var tf tokensFile
	t, err := LoadTokens(file)
	switch {
	case err == nil:
		tf.Tokens = t.entries
	case isMissing(file):
		if err := private.Dir(filepath.Dir(file)); err != nil {
			return "", err
		}
	default:
		return "", err
	}
	kept := tf.Tokens[:0:0]
	for _, e := range tf.Tokens {
		if e.Name == name {
			continue // replaced
		}
		if err := clash(e.Name, name); err != nil {
			return "", fmt.Errorf("token %s: %w", name, err)
		}
		kept = append(kept, e)
	}
	if len(kept) >= MaxTokens {
		return "", fmt.Errorf("tokens file %s has %d tokens, at most %d", file, len(kept), MaxTokens)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("making a token: %w", err)
	}
	token := TokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(token))
	tf.Tokens = append(kept, Entry{Name: name, SHA256: hex.EncodeToString(sum[:]), KeyFile: keyFile, Created: time.Now().UTC().Truncate(time.Second)})
	data, err := json.MarshalIndent(tf, "", "  ")
	if err != nil {
		return "", fmt.Errorf("tokens file %s: %w", file, err)
	}
	if err := private.WriteFile(file, append(data, '\n')); err != nil {
		return "", fmt.Errorf("tokens file: %w", err)
	}
	return token, nil
}

func isMissing(file string) bool {
	_, err := os.Lstat(file)
	return errors.Is(err, fs.ErrNotExist)
}
