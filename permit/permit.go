// Package permit is the proof a tool's activity checks before it runs: a
// token the gate's worker signs, with a key only workers hold, for one
// activity of one call that a gate let through.
//
// Any client of a Temporal namespace can schedule an activity on a task
// queue (a workflow of its own, a worker of its own answering a run's
// workflow task), and a worker runs whatever request reaches it. So the
// gate's decision is not enough where the effect happens: the activity must
// see proof. A permit names the run (workflow and run id), the activity (its
// id, type and task queue), the call (id, tool, argument digest, idempotency
// key), the decision that let it through (who, what kind) and the digest of
// the rules the run was held to for the tool; the activity checks each of
// them against what Temporal tells it (activity.GetInfo) and what it was
// sent, and its signature against the keys it trusts. A destructive call's
// permit is also claimed once (Claimer), so a permit copied from a history
// into another activity of the same run is refused.
//
// A permit is a JWS in compact form, alg EdDSA (Ed25519), protected header
// {"alg":"EdDSA","typ":"toolgate-permit+jwt"}, payload Claims as JSON; a
// verifier in any language needs only Ed25519 and base64url.
package permit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/toolgate/toolgate/internal/text"
)

// Type is the "typ" header of every permit: no approver's token
// (signed.TokenType) is ever taken for one.
const Type = "toolgate-permit+jwt"

// Version is the Claims.Version this package signs and accepts.
const Version = 1

// MaxBytes bounds a permit as a verifier accepts it.
const MaxBytes = 8 << 10

// Errors of Verify and Check; test with errors.Is.
var (
	// ErrMissing: the request carries no permit.
	ErrMissing = errors.New("no permit")
	// ErrMalformed: not a permit this package signs.
	ErrMalformed = errors.New("malformed permit")
	// ErrUnknownKey: signed by a key the verifier does not trust.
	ErrUnknownKey = errors.New("permit signed by an unknown key")
	// ErrBadSignature: the signature does not verify.
	ErrBadSignature = errors.New("bad permit signature")
	// ErrMismatch: the permit is for another run, activity, call or
	// arguments, or another decision, than the one at hand.
	ErrMismatch = errors.New("permit for another call")
	// ErrUsed: the permit was claimed already by another activity.
	ErrUsed = errors.New("permit used already")
)

// Claims are what a permit says.
type Claims struct {
	Version int `json:"v"`
	// ID names this permit for its claim (Claimer): random (NewID).
	ID string `json:"jti"`
	// KeyID names the worker key that signed it (KeyID).
	KeyID string `json:"kid"`
	// WorkflowID and RunID are the run's; ActivityID, Activity and
	// TaskQueue the activity's (its id, type and task queue).
	WorkflowID string `json:"wid"`
	RunID      string `json:"rid"`
	ActivityID string `json:"aid"`
	Activity   string `json:"type"`
	TaskQueue  string `json:"tq"`
	// CallID, Tool, ArgsDigest (tool.Digest of the call's exact arguments)
	// and Key (the idempotency key) are the call's.
	CallID     string `json:"call"`
	Tool       string `json:"tool"`
	ArgsDigest string `json:"digest"`
	Key        string `json:"key"`
	// Destructive is the tool's flag as the worker declares it.
	Destructive bool `json:"destructive,omitempty"`
	// Approver and Kind are the decision the call runs with (tool.Approval):
	// empty for a read no rule held back.
	Approver string `json:"approver,omitempty"`
	Kind     string `json:"kind,omitempty"`
	// Rules is the digest of the rules the run was held to for this tool
	// (the policy, the always_approve switch and the tool's spec), as the
	// worker that signed found them equal to its own.
	Rules string `json:"rules"`
	// IssuedAt is when it was signed (seconds since the epoch).
	IssuedAt int64 `json:"iat"`
}

// NewID is a permit's ID as a worker signs it: 128 random bits, so that no
// one can start a permit's claim (ClaimPrefix+ID) before the activity it
// was signed for does without having read the permit first.
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("permit: crypto/rand: " + err.Error()) // never fails on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// IDFor is a deterministic permit ID for one scheduled activity: the first
// half of the SHA-256 of its workflow id, run id and activity id. Tests use
// it; a worker signs with NewID.
func IDFor(workflowID, runID, activityID string) string {
	sum := sha256.Sum256([]byte(workflowID + "\x00" + runID + "\x00" + activityID))
	return hex.EncodeToString(sum[:16])
}

// KeyID names a worker's public key: the first 16 hex digits of its SHA-256.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

type header struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
}

var b64 = base64.RawURLEncoding.Strict()

// Sign makes a permit of c with priv; it sets c.Version and c.KeyID.
func Sign(priv ed25519.PrivateKey, c Claims) (string, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return "", fmt.Errorf("permit: private key of %d bytes, want %d", len(priv), ed25519.PrivateKeySize)
	}
	c.Version = Version
	c.KeyID = KeyID(priv.Public().(ed25519.PublicKey))
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("permit: %w", err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: priv}, (&jose.SignerOptions{}).WithType(Type))
	if err != nil {
		return "", fmt.Errorf("permit: %w", err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("permit: %w", err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		return "", fmt.Errorf("permit: %w", err)
	}
	if len(tok) > MaxBytes {
		return "", fmt.Errorf("permit: %d bytes, over %d (a tool name or key too long)", len(tok), MaxBytes)
	}
	return tok, nil
}

// Keys are the public keys a verifier trusts, by KeyID.
type Keys map[string]ed25519.PublicKey

// NewKeys is the set of pubs.
func NewKeys(pubs ...ed25519.PublicKey) Keys {
	k := Keys{}
	for _, p := range pubs {
		if len(p) == ed25519.PublicKeySize {
			k[KeyID(p)] = p
		}
	}
	return k
}

// Verify checks a permit's form and signature against keys and returns its
// claims. It checks nothing they say: see Check.
func Verify(token string, keys Keys) (Claims, error) {
	if token == "" {
		return Claims{}, ErrMissing
	}
	if len(token) > MaxBytes {
		return Claims{}, fmt.Errorf("%w: %d bytes, over %d", ErrMalformed, len(token), MaxBytes)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Claims{}, fmt.Errorf("%w: not a JWS in compact form", ErrMalformed)
	}
	rawHeader, err := b64.DecodeString(parts[0])
	if err != nil {
		return Claims{}, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	var h header
	if err := decodeStrict(rawHeader, &h); err != nil || h.Alg != string(jose.EdDSA) || h.Typ != Type {
		return Claims{}, fmt.Errorf("%w: header must be exactly {\"alg\":\"EdDSA\",\"typ\":%q}", ErrMalformed, Type)
	}
	payload, err := b64.DecodeString(parts[1])
	if err != nil {
		return Claims{}, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	var c Claims
	if err := decodeStrict(payload, &c); err != nil {
		return Claims{}, fmt.Errorf("%w: claims: %v", ErrMalformed, err)
	}
	if c.Version != Version {
		return Claims{}, fmt.Errorf("%w: version %d, want %d", ErrMalformed, c.Version, Version)
	}
	pub, ok := keys[c.KeyID]
	if !ok {
		return Claims{}, fmt.Errorf("%w: key %q is not one this worker trusts (every worker of a task queue, and every worker hosting its tools, must hold the same worker key: toolgate keys worker)", ErrUnknownKey, cut(c.KeyID, 32))
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		return Claims{}, fmt.Errorf("%w: signature: %v", ErrMalformed, err)
	}
	if !ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig) {
		return Claims{}, fmt.Errorf("%w: it does not verify with key %s", ErrBadSignature, c.KeyID)
	}
	return c, nil
}

// Binding is what a permit must name: what Temporal says of the activity
// (activity.GetInfo) and what the activity was sent.
type Binding struct {
	WorkflowID, RunID, ActivityID, Activity, TaskQueue string
	CallID, ArgsDigest, Key                            string
	// Approver and Kind are the approval the request carries ("" for none).
	Approver, Kind string
}

// Check compares c with b field by field; the error names the first that
// differs.
func Check(c Claims, b Binding) error {
	for _, f := range []struct{ what, got, want string }{
		{"workflow", c.WorkflowID, b.WorkflowID},
		{"run", c.RunID, b.RunID},
		{"activity id", c.ActivityID, b.ActivityID},
		{"activity type", c.Activity, b.Activity},
		{"task queue", c.TaskQueue, b.TaskQueue},
		{"call id", c.CallID, b.CallID},
		{"argument digest", c.ArgsDigest, b.ArgsDigest},
		{"idempotency key", c.Key, b.Key},
		{"approver", c.Approver, b.Approver},
		{"decision kind", c.Kind, b.Kind},
	} {
		if f.got != f.want {
			return fmt.Errorf("%w: its %s is %q, this activity's is %q", ErrMismatch, f.what, cut(f.got, 120), cut(f.want, 120))
		}
	}
	return nil
}

// decodeStrict decodes data into v refusing unknown fields and trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// cut is s within n bytes (at a rune boundary), "…" marking a cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return text.Cut(s, n) + "…"
}
