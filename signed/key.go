package signed

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strings"
)

// KeyPrefix starts a public key's text form: "ed25519:" followed by the
// key's 32 bytes in unpadded base64url. It is the form `toolgate keys new`
// prints and a policy file's approvers declare.
const KeyPrefix = "ed25519:"

// FormatPublicKey writes a public key in its text form.
func FormatPublicKey(pub ed25519.PublicKey) string {
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(pub)
}

// ParsePublicKey reads a public key's text form.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), KeyPrefix)
	if !ok {
		return nil, fmt.Errorf("public key %q: want %s followed by 43 base64url characters (toolgate keys new prints one)", cut(s, 80), KeyPrefix)
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("public key %q: %w", cut(s, 80), err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key %q: %d bytes, want %d", cut(s, 80), len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
