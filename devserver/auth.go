package devserver

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/internal/private"
)

// AuthOptions turns on the server's authorization (Options.Authorization):
// every call of the public frontend (Address) is authenticated and given a
// role, and history events carry the caller's principal.
//
// # Credentials
//
// A client sends a bearer token in its "authorization" header
// ("Bearer TOKEN"): a JWT (RFC 7519) signed with EdDSA (Ed25519) by a key
// the server keeps in KeyDir (SigningKeyFile, made on first start, kept
// across restarts, mode 0600). Its claims are iss "toolgate-dev", sub (who:
// the principal's name), role ("worker" or "person"), iat, nbf and exp.
// MintToken makes one; Start writes a worker's to KeyDir/WorkerTokenFile
// (see WorkerTokenTTL). No token is ever logged or printed.
//
// With TLS and a client CA, a client certificate's subject common name in
// WorkerSubjects gives the worker role; any other certificate the person
// role (named by its common name). A bearer token, when given, counts
// instead of the certificate.
//
// No credential at all gives the person role, named principal.Anonymous.
// A bad token (malformed, signed by another key, expired, not yet valid,
// another issuer, an unknown role) is refused with Unauthenticated and a
// message that says which; it is never downgraded to the person role: a
// worker whose token went stale then fails loudly at once, instead of
// polling as a person and being refused with a puzzle.
//
// # Roles
//
// The worker role may call every API. The person role may call the APIs in
// PersonAPIs alone (start, signal, signal-with-start, update — update-with-
// start too —, query, describe, list, count, scan, history, cancel,
// terminate, reset, delete, and the cluster and namespace reads an SDK
// client makes), and never with a request that changes versioning (a start
// with a versioning override or eager execution, a reset that updates the
// run's options); everything else — polling and answering tasks, heartbeats,
// completing activities by id, resetting sticky queues, versioning and
// worker deployments, activity options, schedules, batches, Nexus and the
// operator and admin APIs — is refused with PermissionDenied. An API not in
// PersonAPIs is a worker's: one a newer server adds is closed by default.
//
// The authorizer's principal is {Type: the role granted ("worker" or
// "person", package principal), Name: the credential's subject}; the
// server's own parts (its system workers: schedules, batches, deletions,
// Nexus dispatch and callbacks) use an internal frontend on 127.0.0.1 that
// skips these roles, with the principal {Type: "temporal", Name:
// "internal"}. With principal attribution on (Start sets the dynamic config
// frontend.enablePrincipalPropagation), the server stamps each history event
// it writes for a call with that principal.
//
// The internal frontend, like history and matching, listens on 127.0.0.1
// without credentials: authorization keeps out clients of the frontend
// (other machines, or this machine's processes through Address), not a
// process of this machine that dials the server's internal ports.
type AuthOptions struct {
	// KeyDir holds the signing key and the worker token: "" means
	// DataDir/auth (required with Database and no DataDir). Created 0700.
	KeyDir string
	// WorkerSubjects are the client certificate subject common names that
	// get the worker role (with TLS.ClientCAFile). Any other certificate
	// gets the person role.
	WorkerSubjects []string
}

// Files in AuthOptions.KeyDir.
const (
	// SigningKeyFile is the Ed25519 key (a JWK, mode 0600) that signs and
	// checks tokens. Remove it (and restart) to make every token minted so
	// far worthless.
	SigningKeyFile = "signing-key.jwk"
	// WorkerTokenFile is the worker token Start writes (mode 0600): what
	// another worker process sends ("toolgate worker --token-file FILE").
	WorkerTokenFile = "worker.token"
	// localTLSDir holds, under TLS with client certificates, the client
	// certificate of this process's own clients (the UI, dev's worker) and
	// the CA that signed it (whose key is removed once it signed).
	localTLSDir = "local-tls"
)

// Roles, the principal types of the calls they allow.
const (
	RoleWorker = principal.Worker
	RolePerson = principal.Person
)

// WorkerTokenTTL is how long the worker token Start writes is valid. Start
// writes a fresh one, and a running server replaces it every
// workerTokenRenewal, so a worker that reads the file again when it changes
// (toolgate's --token-file does) never holds an expired one; a copy taken
// elsewhere expires after WorkerTokenTTL.
const WorkerTokenTTL = 30 * 24 * time.Hour

// workerTokenRenewal is how often a running server replaces the worker token file.
const workerTokenRenewal = 24 * time.Hour

// WorkerTokenSubject is the subject (principal name) of the worker token Start writes.
const WorkerTokenSubject = "toolgate-dev-worker"

// LocalClientName is the common name of the client certificate of the
// server's own clients under TLS with client certificates (the UI, dev's
// in-process worker). It never gets the worker role by itself.
const LocalClientName = "toolgate-dev-local"

// tokenIssuer is the iss of every token.
const tokenIssuer = "toolgate-dev"

// tokenLeeway is the clock skew tolerated on exp, nbf and iat.
const tokenLeeway = 30 * time.Second

// maxSubject bounds a subject's length.
const maxSubject = 200

// tokenClaims are a token's claims.
type tokenClaims struct {
	jwt.Claims
	Role string `json:"role"`
}

// authority signs and checks the tokens of one server.
type authority struct {
	dir            string
	key            ed25519.PrivateKey
	signer         jose.Signer
	workerSubjects []string
	now            func() time.Time
}

// openAuthority loads the signing key from dir, or makes it.
func openAuthority(dir string, opts *AuthOptions) (*authority, error) {
	if err := private.Dir(dir); err != nil {
		return nil, fmt.Errorf("devserver: authorization: %w", err)
	}
	key, err := loadOrMakeKey(filepath.Join(dir, SigningKeyFile))
	if err != nil {
		return nil, fmt.Errorf("devserver: authorization: %w", err)
	}
	jwk := jose.JSONWebKey{Key: key.Public(), Algorithm: string(jose.EdDSA), Use: "sig"}
	thumb, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("devserver: authorization: key id: %w", err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), base64.RawURLEncoding.EncodeToString(thumb[:12])))
	if err != nil {
		return nil, fmt.Errorf("devserver: authorization: signer: %w", err)
	}
	return &authority{dir: dir, key: key, signer: signer, workerSubjects: slices.Clone(opts.WorkerSubjects), now: time.Now}, nil
}

// loadOrMakeKey reads the Ed25519 JWK at path, or writes a new one there.
func loadOrMakeKey(path string) (ed25519.PrivateKey, error) {
	data, err := private.ReadFile(path, 4096)
	if errors.Is(err, fs.ErrNotExist) {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("making the signing key: %w", err)
		}
		data, err := json.Marshal(jose.JSONWebKey{Key: key, Algorithm: string(jose.EdDSA), Use: "sig"})
		if err != nil {
			return nil, fmt.Errorf("encoding the signing key: %w", err)
		}
		if err := private.WriteFile(path, data); err != nil {
			return nil, err
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the signing key: %w", err)
	}
	var jwk jose.JSONWebKey
	if err := json.Unmarshal(data, &jwk); err != nil {
		return nil, fmt.Errorf("signing key %s: %w (remove it to make a new one; every token made so far then stops working)", path, err)
	}
	key, ok := jwk.Key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("signing key %s: not an Ed25519 private key (remove it to make a new one; every token made so far then stops working)", path)
	}
	return key, nil
}

// checkRole says what is wrong with role, or nil.
func checkRole(role string) error {
	if role != RoleWorker && role != RolePerson {
		return fmt.Errorf("role %q: want %q or %q", role, RoleWorker, RolePerson)
	}
	return nil
}

// checkSubject says what is wrong with subject, or nil.
func checkSubject(subject string) error {
	if subject == "" || len(subject) > maxSubject {
		return fmt.Errorf("subject %q: want 1 to %d characters", subject, maxSubject)
	}
	if strings.IndexFunc(subject, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return fmt.Errorf("subject %q: only printable characters", subject)
	}
	return nil
}

// mint signs a token of role for subject, valid for ttl from now.
func (a *authority) mint(role, subject string, ttl time.Duration) (string, error) {
	if err := checkRole(role); err != nil {
		return "", fmt.Errorf("devserver: token: %w", err)
	}
	if err := checkSubject(subject); err != nil {
		return "", fmt.Errorf("devserver: token: %w", err)
	}
	if ttl <= 0 {
		return "", fmt.Errorf("devserver: token: validity %v is not positive", ttl)
	}
	var id [12]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", fmt.Errorf("devserver: token id: %w", err)
	}
	now := a.now()
	c := tokenClaims{Claims: jwt.Claims{
		Issuer: tokenIssuer, Subject: subject, ID: base64.RawURLEncoding.EncodeToString(id[:]),
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(ttl)),
	}, Role: role}
	tok, err := jwt.Signed(a.signer).Claims(c).Serialize()
	if err != nil {
		return "", fmt.Errorf("devserver: signing a token: %w", err)
	}
	return tok, nil
}

// writeWorkerToken writes a fresh worker token to KeyDir/WorkerTokenFile.
func (a *authority) writeWorkerToken() error {
	tok, err := a.mint(RoleWorker, WorkerTokenSubject, WorkerTokenTTL)
	if err != nil {
		return err
	}
	if err := private.WriteFile(filepath.Join(a.dir, WorkerTokenFile), []byte(tok+"\n")); err != nil {
		return fmt.Errorf("devserver: worker token: %w", err)
	}
	return nil
}

// grant is who a call's credential says it comes from, or why the
// credential is refused (err).
type grant struct {
	role, subject string
	err           error
}

// verifyHeader checks an "authorization" header's bearer token.
func (a *authority) verifyHeader(header string) grant {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(tok) == "" {
		return grant{err: errors.New(`the authorization header is not "Bearer TOKEN"`)}
	}
	return a.verify(strings.TrimSpace(tok))
}

// verify checks a token: signed by this server's key, issuer, times, role, subject.
func (a *authority) verify(tok string) grant {
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return grant{err: errors.New("the bearer token is not a token of a toolgate dev server (not an EdDSA-signed JWT)")}
	}
	var c tokenClaims
	if err := parsed.Claims(a.key.Public(), &c); err != nil {
		return grant{err: errors.New("the bearer token is not signed by this dev server's key: it was made by another data directory's server, or before the key was replaced")}
	}
	switch err := c.ValidateWithLeeway(jwt.Expected{Issuer: tokenIssuer, Time: a.now()}, tokenLeeway); {
	case errors.Is(err, jwt.ErrExpired):
		return grant{err: fmt.Errorf("the bearer token expired at %s: a worker's is renewed in auth/%s of the dev server's data directory", c.Expiry.Time().UTC().Format(time.RFC3339), WorkerTokenFile)}
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return grant{err: errors.New("the bearer token is not valid yet (is this machine's clock behind the server's?)")}
	case err != nil:
		return grant{err: fmt.Errorf("the bearer token's claims: issuer %q, want %q", c.Issuer, tokenIssuer)}
	}
	if c.Expiry == nil {
		return grant{err: errors.New("the bearer token has no expiry")}
	}
	if err := checkRole(c.Role); err != nil {
		return grant{err: fmt.Errorf("the bearer token's %w", err)}
	}
	if err := checkSubject(c.Subject); err != nil {
		return grant{err: fmt.Errorf("the bearer token's %w", err)}
	}
	return grant{role: c.Role, subject: c.Subject}
}

// certificate is the grant of a verified client certificate's subject
// common name.
func (a *authority) certificate(cn string) grant {
	subject := cn
	if checkSubject(subject) != nil {
		subject = "client certificate"
	}
	if cn != LocalClientName && slices.Contains(a.workerSubjects, cn) {
		return grant{role: RoleWorker, subject: subject}
	}
	return grant{role: RolePerson, subject: subject}
}

// MintToken makes a bearer token of role (RoleWorker or RolePerson) for
// subject (the principal name history events carry), valid for ttl, signed
// with the key in dir (an AuthOptions.KeyDir: DataDir/auth by default; the
// key is made if missing). A server on that key accepts it until it
// expires, or until the key file is removed.
func MintToken(dir, role, subject string, ttl time.Duration) (string, error) {
	a, err := openAuthority(dir, &AuthOptions{})
	if err != nil {
		return "", err
	}
	return a.mint(role, subject, ttl)
}
