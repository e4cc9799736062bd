package signed

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func claims() Claims {
	return Claims{
		Approver: "bob", WorkflowID: "run-1", Action: ActionApprove,
		CallID: "c-3", ArgsDigest: "sha256:ab", Note: "ok",
		IssuedAt: t0.Unix(), Expiry: t0.Add(10 * time.Minute).Unix(),
	}
}

func key(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := GenerateKey()
	require.NoError(t, err)
	return pub, priv
}

func enc(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// signRaw makes a compact JWS of the given header and payload JSON, signed
// with priv whatever the header says.
func signRaw(priv ed25519.PrivateKey, header, payload string) string {
	in := enc([]byte(header)) + "." + enc([]byte(payload))
	return in + "." + enc(ed25519.Sign(priv, []byte(in)))
}

func payloadJSON(t *testing.T, c Claims) string {
	b, err := json.Marshal(c)
	require.NoError(t, err)
	return string(b)
}

const goodHeader = `{"alg":"EdDSA","typ":"toolgate+jwt"}`

func TestRoundTrip(t *testing.T) {
	pub, priv := key(t)
	for _, c := range []Claims{
		claims(),
		{Approver: "alice", WorkflowID: "w", Action: ActionGrant, Grant: &Grant{Tool: "refund", When: "args.amount < 100", Uses: 2, Until: 9}, IssuedAt: 1, Expiry: 2},
		{Approver: "alice", WorkflowID: "w", Action: ActionStart, GoalDigest: strings.Repeat("a", 64), IssuedAt: 1, Expiry: 2},
	} {
		tok, err := Sign(priv, c)
		require.NoError(t, err)
		assert.Equal(t, 2, strings.Count(tok, "."))

		h, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
		require.NoError(t, err)
		assert.JSONEq(t, goodHeader, string(h))

		peeked, err := Peek(tok)
		require.NoError(t, err)
		assert.Equal(t, c, peeked)
		got, err := Verify(tok, pub)
		require.NoError(t, err)
		assert.Equal(t, c, got)
	}
	// The registered claims are where a JWT library looks for them.
	tok, err := Sign(priv, claims())
	require.NoError(t, err)
	var m map[string]any
	p, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	require.NoError(t, json.Unmarshal(p, &m))
	assert.Equal(t, "bob", m["sub"])
	assert.Equal(t, float64(t0.Unix()), m["iat"])
	assert.Equal(t, float64(t0.Add(10*time.Minute).Unix()), m["exp"])
}

func TestSignRefuses(t *testing.T) {
	_, priv := key(t)
	for name, mod := range map[string]func(*Claims){
		"no approver":    func(c *Claims) { c.Approver = "" },
		"no workflow":    func(c *Claims) { c.WorkflowID = "" },
		"no action":      func(c *Claims) { c.Action = "" },
		"exp == iat":     func(c *Claims) { c.Expiry = c.IssuedAt },
		"exp before iat": func(c *Claims) { c.Expiry = c.IssuedAt - 1 },
		"too big":        func(c *Claims) { c.Note = strings.Repeat("x", MaxTokenBytes) },
	} {
		t.Run(name, func(t *testing.T) {
			c := claims()
			mod(&c)
			_, err := Sign(priv, c)
			assert.Error(t, err)
		})
	}
	_, err := Sign(priv[:10], claims())
	assert.Error(t, err)
}

func TestTampered(t *testing.T) {
	pub, priv := key(t)
	tok, err := Sign(priv, claims())
	require.NoError(t, err)
	parts := strings.Split(tok, ".")

	c := claims()
	c.CallID = "c-4"
	tampered := parts[0] + "." + enc([]byte(payloadJSON(t, c))) + "." + parts[2]
	peeked, err := Peek(tampered) // Peek does not verify
	require.NoError(t, err)
	assert.Equal(t, "c-4", peeked.CallID)
	_, err = Verify(tampered, pub)
	assert.ErrorIs(t, err, ErrBadSignature)

	// A flipped signature bit.
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sig[0] ^= 1
	_, err = Verify(parts[0]+"."+parts[1]+"."+enc(sig), pub)
	assert.ErrorIs(t, err, ErrBadSignature)

	// Header re-encoded with the same meaning: the signature covers its bytes.
	h2 := enc([]byte(`{"typ":"toolgate+jwt","alg":"EdDSA"}`))
	_, err = Verify(h2+"."+parts[1]+"."+parts[2], pub)
	assert.ErrorIs(t, err, ErrBadSignature)
}

func TestOtherKey(t *testing.T) {
	_, priv := key(t)
	other, _ := key(t)
	tok, err := Sign(priv, claims())
	require.NoError(t, err)
	_, err = Verify(tok, other)
	assert.ErrorIs(t, err, ErrBadSignature)

	// A key of the wrong size is an error, not a panic.
	_, err = Verify(tok, other[:31])
	assert.Error(t, err)
	_, err = Verify(tok, nil)
	assert.Error(t, err)
}

// refused checks that Peek and Verify (with the key that did sign, where
// one did) refuse tok as malformed.
func refused(t *testing.T, tok string, pub ed25519.PublicKey) {
	t.Helper()
	_, err := Peek(tok)
	assert.ErrorIs(t, err, ErrMalformed, "Peek")
	_, err = Verify(tok, pub)
	assert.ErrorIs(t, err, ErrMalformed, "Verify")
}

func TestRefusedAlgs(t *testing.T) {
	pub, priv := key(t)
	p := enc([]byte(payloadJSON(t, claims())))

	t.Run("none", func(t *testing.T) {
		refused(t, enc([]byte(`{"alg":"none","typ":"toolgate+jwt"}`))+"."+p+".", pub)
		refused(t, enc([]byte(`{"alg":"none"}`))+"."+p+".", pub)
		// Signed for real, but saying none.
		refused(t, signRaw(priv, `{"alg":"none","typ":"toolgate+jwt"}`, payloadJSON(t, claims())), pub)
	})
	t.Run("HS256", func(t *testing.T) {
		// The HMAC key is the public key's bytes: the classic confusion.
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(pub)}, (&jose.SignerOptions{}).WithType(TokenType))
		require.NoError(t, err)
		jws, err := s.Sign([]byte(payloadJSON(t, claims())))
		require.NoError(t, err)
		tok, err := jws.CompactSerialize()
		require.NoError(t, err)
		refused(t, tok, pub)
	})
	t.Run("embedded jwk", func(t *testing.T) {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: priv}, (&jose.SignerOptions{EmbedJWK: true}).WithType(TokenType))
		require.NoError(t, err)
		jws, err := s.Sign([]byte(payloadJSON(t, claims())))
		require.NoError(t, err)
		tok, err := jws.CompactSerialize()
		require.NoError(t, err)
		require.Contains(t, decodeHeader(t, tok), `"jwk"`)
		refused(t, tok, pub)
	})
	t.Run("JSON serialization", func(t *testing.T) {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: priv}, (&jose.SignerOptions{}).WithType(TokenType))
		require.NoError(t, err)
		jws, err := s.Sign([]byte(payloadJSON(t, claims())))
		require.NoError(t, err)
		refused(t, jws.FullSerialize(), pub)
	})
	// Well signed by the right key, but with a header toolgate never makes.
	for _, h := range []string{
		`{"alg":"EdDSA","typ":"toolgate+jwt","jwk":{"kty":"OKP","crv":"Ed25519","x":"` + enc(pub) + `"}}`,
		`{"alg":"EdDSA","typ":"toolgate+jwt","jku":"https://example.com/keys"}`,
		`{"alg":"EdDSA","typ":"toolgate+jwt","x5u":"https://example.com/cert"}`,
		`{"alg":"EdDSA","typ":"toolgate+jwt","x5c":["MIIB"]}`,
		`{"alg":"EdDSA","typ":"toolgate+jwt","kid":"alice"}`,
		`{"alg":"EdDSA","typ":"toolgate+jwt","b64":false,"crit":["b64"]}`,
		`{"alg":"EdDSA","typ":"JWT"}`,
		`{"alg":"EdDSA"}`,
		`{"alg":"ES256","typ":"toolgate+jwt"}`,
		`{"alg":"none","alg":"EdDSA","typ":"toolgate+jwt"}`,
		`{"ALG":"none","alg":"EdDSA","typ":"toolgate+jwt"}`,
		`{"Alg":"EdDSA","typ":"toolgate+jwt"}`,
		`{"alg":"EdDSA","typ":"toolgate+jwt"} {}`,
		`["EdDSA"]`,
		`not json`,
	} {
		t.Run("header "+h, func(t *testing.T) {
			refused(t, signRaw(priv, h, payloadJSON(t, claims())), pub)
		})
	}
}

func decodeHeader(t *testing.T, tok string) string {
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
	require.NoError(t, err)
	return string(b)
}

func TestRefusedForm(t *testing.T) {
	pub, priv := key(t)
	tok, err := Sign(priv, claims())
	require.NoError(t, err)
	parts := strings.Split(tok, ".")
	for name, bad := range map[string]string{
		"empty":          "",
		"two parts":      parts[0] + "." + parts[1],
		"four parts":     tok + "." + parts[2],
		"padding":        tok + "==",
		"space":          " " + tok,
		"newline inside": parts[0] + ".\n" + parts[1] + "." + parts[2],
		"std base64":     strings.NewReplacer("-", "+", "_", "/").Replace(tok) + "+",
		"short sig":      parts[0] + "." + parts[1] + "." + parts[2][:40],
		"empty payload":  parts[0] + ".." + parts[2],
	} {
		t.Run(name, func(t *testing.T) { refused(t, bad, pub) })
	}
	t.Run("over MaxTokenBytes", func(t *testing.T) {
		c := claims()
		c.Note = strings.Repeat("x", MaxTokenBytes)
		big := signRaw(priv, goodHeader, payloadJSON(t, c))
		require.Greater(t, len(big), MaxTokenBytes)
		refused(t, big, pub)
		// Just under passes.
		c.Note = strings.Repeat("x", MaxTokenBytes*3/4-300)
		ok := signRaw(priv, goodHeader, payloadJSON(t, c))
		require.LessOrEqual(t, len(ok), MaxTokenBytes)
		_, err := Verify(ok, pub)
		assert.NoError(t, err)
	})
}

func TestRefusedClaims(t *testing.T) {
	pub, priv := key(t)
	good := payloadJSON(t, claims())
	for name, p := range map[string]string{
		"unknown field":       strings.Replace(good, `{`, `{"admin":true,`, 1),
		"unknown grant field": `{"sub":"a","wid":"w","act":"grant","grant":{"tool":"t","scope":"all"},"iat":1,"exp":2}`,
		"duplicate sub":       strings.Replace(good, `{`, `{"sub":"mallory",`, 1),
		"duplicate in grant":  `{"sub":"a","wid":"w","act":"grant","grant":{"tool":"t","tool":"u"},"iat":1,"exp":2}`,
		"trailing data":       good + `{}`,
		"not an object":       `"bob"`,
		"string iat":          `{"sub":"a","wid":"w","act":"approve","iat":"1","exp":2}`,
		"fractional exp":      `{"sub":"a","wid":"w","act":"approve","iat":1,"exp":2.5}`,
		"no sub":              `{"wid":"w","act":"approve","iat":1,"exp":2}`,
		"null sub":            `{"sub":null,"wid":"w","act":"approve","iat":1,"exp":2}`,
		"no wid":              `{"sub":"a","act":"approve","iat":1,"exp":2}`,
		"no act":              `{"sub":"a","wid":"w","iat":1,"exp":2}`,
		"no exp":              `{"sub":"a","wid":"w","act":"approve","iat":1}`,
		"exp before iat":      `{"sub":"a","wid":"w","act":"approve","iat":3,"exp":2}`,
		"case-folded field":   `{"SUB":"a","wid":"w","act":"approve","iat":1,"exp":2}`,
	} {
		t.Run(name, func(t *testing.T) { refused(t, signRaw(priv, goodHeader, p), pub) })
	}
	// The same, well formed, passes: the refusals above are the claims'.
	_, err := Verify(signRaw(priv, goodHeader, good), pub)
	assert.NoError(t, err)
}

func TestCheckTime(t *testing.T) {
	c := claims() // iat t0, exp t0+10m
	skew := time.Minute
	for name, tc := range map[string]struct {
		now  time.Time
		want error
	}{
		"at iat":                 {t0, nil},
		"just before exp":        {t0.Add(10*time.Minute - time.Nanosecond), nil},
		"at exp":                 {t0.Add(10 * time.Minute), ErrExpired},
		"after exp":              {t0.Add(time.Hour), ErrExpired},
		"before iat within skew": {t0.Add(-skew), nil},
		"before iat beyond skew": {t0.Add(-skew - time.Second), ErrNotYetValid},
		"long before iat":        {t0.Add(-time.Hour), ErrNotYetValid},
	} {
		t.Run(name, func(t *testing.T) {
			err := c.CheckTime(tc.now, skew)
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tc.want)
		})
	}
	err := c.CheckTime(t0.Add(time.Hour).In(time.FixedZone("X", 3600)), skew)
	assert.ErrorContains(t, err, "expired at 2025-01-02T03:14:05Z (now 2025-01-02T04:04:05Z)")
	err = c.CheckTime(t0.Add(-time.Hour), skew)
	assert.ErrorContains(t, err, "issued at 2025-01-02T03:04:05Z, after now (2025-01-02T02:04:05Z)")
}

func TestParsePublicKey(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	s := FormatPublicKey(pub)
	got, err := ParsePublicKey(s)
	require.NoError(t, err)
	assert.Equal(t, pub, got)
	got, err = ParsePublicKey("  " + s + "\n")
	require.NoError(t, err)
	assert.Equal(t, pub, got)

	rest := strings.TrimPrefix(s, KeyPrefix)
	for name, bad := range map[string]string{
		"empty":       "",
		"no prefix":   rest,
		"other curve": "p256:" + rest,
		"upper":       "ED25519:" + rest,
		"padded":      s + "=",
		"std base64":  KeyPrefix + base64.RawStdEncoding.EncodeToString(append([]byte{0xfb, 0xff}, pub[2:]...)),
		"short":       KeyPrefix + enc(pub[:31]),
		"long":        KeyPrefix + enc(append(append([]byte{}, pub...), 0)),
		"not base64":  KeyPrefix + strings.Repeat("!", 43),
		"prefix only": KeyPrefix,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePublicKey(bad)
			assert.Error(t, err)
		})
	}
}
