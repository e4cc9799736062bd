package signed

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// MaxTokenBytes bounds a token as a run accepts it.
const MaxTokenBytes = 8 << 10

// TokenType is the "typ" header of every token.
const TokenType = "toolgate+jwt"

// Errors of Peek, Verify and Claims.CheckTime; test with errors.Is.
var (
	// ErrMalformed: the token is not one toolgate makes (not compact JWS,
	// another algorithm, a header other than alg and typ, claims that do not
	// decode strictly or lack sub, wid, act, or whose exp is not after iat).
	ErrMalformed = errors.New("malformed token")
	// ErrBadSignature: the signature does not verify with the approver's key.
	ErrBadSignature = errors.New("bad token signature")
	// ErrExpired: the token's exp has passed.
	ErrExpired = errors.New("token expired")
	// ErrNotYetValid: the token's iat is in the future (beyond the skew).
	ErrNotYetValid = errors.New("token not yet valid")
)

// header is a token's protected header; nothing else may be in it. In
// particular no header naming a key (jwk, jku, kid, x5u, x5c, ...) and no
// crit or b64: the key always comes from the worker's policy.
type header struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
}

var algs = []jose.SignatureAlgorithm{jose.EdDSA}

var b64 = base64.RawURLEncoding.Strict()

// Sign makes a token: JWS compact serialization, alg EdDSA, header
// "typ": "toolgate+jwt", payload the Claims as JSON. It refuses claims with
// an empty Approver, WorkflowID or Action, or Expiry <= IssuedAt.
func Sign(priv ed25519.PrivateKey, c Claims) (string, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return "", fmt.Errorf("sign: private key of %d bytes, want %d", len(priv), ed25519.PrivateKeySize)
	}
	if err := c.check(); err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: priv}, (&jose.SignerOptions{}).WithType(TokenType))
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	if len(tok) > MaxTokenBytes {
		return "", fmt.Errorf("sign: token of %d bytes, over the %d a run accepts (shorten the note or reason)", len(tok), MaxTokenBytes)
	}
	return tok, nil
}

// Peek decodes a token's claims WITHOUT verifying it, to learn which
// approver's key to verify it with. It refuses (ErrMalformed) a token over
// MaxTokenBytes, not in compact JWS form, whose protected header is anything
// but {"alg":"EdDSA","typ":"toolgate+jwt"}, or whose payload does not decode
// strictly into Claims (unknown or duplicate fields, trailing data) or lacks
// sub, wid or act, or whose exp is not after its iat.
//
// Peek is deterministic (no clock, no randomness, no I/O): workflows call it.
func Peek(token string) (Claims, error) {
	c, _, err := parse(token)
	return c, err
}

// Verify checks the token's signature with pub and returns its claims, as
// Peek decodes them. Errors wrap ErrMalformed or ErrBadSignature. It does not
// check the token's times: see Claims.CheckTime.
//
// Verify is deterministic (no clock, no randomness, no I/O): workflows call it.
func Verify(token string, pub ed25519.PublicKey) (Claims, error) {
	c, payload, err := parse(token)
	if err != nil {
		return Claims{}, err
	}
	if len(pub) != ed25519.PublicKeySize { // ed25519.Verify panics on it
		return Claims{}, fmt.Errorf("%w: public key of %d bytes, want %d", ErrBadSignature, len(pub), ed25519.PublicKeySize)
	}
	jws, err := jose.ParseSignedCompact(token, algs)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(jws.Signatures) != 1 {
		return Claims{}, fmt.Errorf("%w: %d signatures, want 1", ErrMalformed, len(jws.Signatures))
	}
	verified, err := jws.Verify(pub)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: token of %q does not verify with the key the policy declares for that approver", ErrBadSignature, cut(c.Approver, 80))
	}
	if !bytes.Equal(verified, payload) { // cannot happen; parse and go-jose decode the same text
		return Claims{}, fmt.Errorf("%w: verified payload differs from the decoded one", ErrMalformed)
	}
	return c, nil
}

// parse checks a token's form and header and decodes its claims, returning
// them with the raw payload.
func parse(token string) (Claims, []byte, error) {
	if len(token) > MaxTokenBytes {
		return Claims{}, nil, fmt.Errorf("%w: %d bytes, over %d", ErrMalformed, len(token), MaxTokenBytes)
	}
	for i := 0; i < len(token); i++ {
		if b := token[i]; !(b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.') {
			return Claims{}, nil, fmt.Errorf("%w: not a JWS in compact form (character %q at %d)", ErrMalformed, b, i)
		}
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Claims{}, nil, fmt.Errorf("%w: not a JWS in compact form (%d parts, want 3)", ErrMalformed, len(parts))
	}
	rawHeader, err := b64.DecodeString(parts[0])
	if err != nil {
		return Claims{}, nil, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	var h header
	if err := decodeStrict(rawHeader, &h); err != nil {
		return Claims{}, nil, fmt.Errorf("%w: header (only alg and typ are allowed): %v", ErrMalformed, err)
	}
	if h.Alg != string(jose.EdDSA) {
		return Claims{}, nil, fmt.Errorf("%w: alg %q, want %s", ErrMalformed, cut(h.Alg, 40), jose.EdDSA)
	}
	if h.Typ != TokenType {
		return Claims{}, nil, fmt.Errorf("%w: typ %q, want %s", ErrMalformed, cut(h.Typ, 40), TokenType)
	}
	payload, err := b64.DecodeString(parts[1])
	if err != nil {
		return Claims{}, nil, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		return Claims{}, nil, fmt.Errorf("%w: signature: %v", ErrMalformed, err)
	}
	if len(sig) != ed25519.SignatureSize {
		return Claims{}, nil, fmt.Errorf("%w: signature of %d bytes, want %d", ErrMalformed, len(sig), ed25519.SignatureSize)
	}
	var c Claims
	if err := decodeStrict(payload, &c); err != nil {
		return Claims{}, nil, fmt.Errorf("%w: claims: %v", ErrMalformed, err)
	}
	if err := c.check(); err != nil {
		return Claims{}, nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return c, payload, nil
}

// check refuses claims no token may carry.
func (c Claims) check() error {
	switch {
	case c.Approver == "":
		return errors.New("claims: no approver (sub)")
	case c.WorkflowID == "":
		return errors.New("claims: no workflow id (wid)")
	case c.Action == "":
		return errors.New("claims: no action (act)")
	case c.Expiry <= c.IssuedAt:
		return fmt.Errorf("claims: exp %d is not after iat %d", c.Expiry, c.IssuedAt)
	}
	return nil
}

// decodeStrict decodes one JSON object into v (a pointer to a struct),
// refusing unknown fields, keys that match a field only case-insensitively
// (encoding/json would take them), duplicate keys, and anything after the
// object.
func decodeStrict(data []byte, v any) error {
	if err := exactKeys(data, reflect.TypeOf(v).Elem()); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}

// exactKeys walks JSON data that is to decode into a value of type t and
// refuses an object naming a key twice (parsers differ on which one counts)
// or, where t is a struct, a key that is not exactly one of its fields' JSON
// names.
func exactKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := walkKeys(dec, t); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}

func walkKeys(dec *json.Decoder, t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		var fields map[string]reflect.Type
		if t != nil && t.Kind() == reflect.Struct {
			fields = jsonFields(t)
		}
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := k.(string)
			if seen[key] {
				return fmt.Errorf("duplicate key %q", cut(key, 40))
			}
			seen[key] = true
			var ft reflect.Type
			if fields != nil {
				var ok bool
				if ft, ok = fields[key]; !ok {
					return fmt.Errorf("unknown field %q", cut(key, 40))
				}
			} else if t != nil && t.Kind() == reflect.Map {
				ft = t.Elem()
			}
			if err := walkKeys(dec, ft); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('['):
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		for dec.More() {
			if err := walkKeys(dec, et); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}

// jsonFields maps a struct's JSON field names to their types (the structs
// here have neither embedded fields nor unnamed ones).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	return m
}

// CheckTime says whether the claims are valid at now: ErrExpired if
// now >= Expiry, ErrNotYetValid if IssuedAt > now+skew. Its messages give the
// times in RFC 3339, UTC.
//
// CheckTime is deterministic: workflows call it with workflow.Now.
func (c Claims) CheckTime(now time.Time, skew time.Duration) error {
	exp := time.Unix(c.Expiry, 0)
	if !now.Before(exp) {
		return fmt.Errorf("%w: token of %q expired at %s (now %s)", ErrExpired, cut(c.Approver, 80), rfc3339(exp), rfc3339(now))
	}
	iat := time.Unix(c.IssuedAt, 0)
	if iat.After(now.Add(skew)) {
		return fmt.Errorf("%w: token of %q is issued at %s, after now (%s) by more than the %s allowed for clock skew",
			ErrNotYetValid, cut(c.Approver, 80), rfc3339(iat), rfc3339(now), skew)
	}
	return nil
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }
