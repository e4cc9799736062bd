// Package connect is the one place toolgate builds a connection to Temporal.
// Every command that talks to Temporal (worker, inbox, run, status, approve,
// pending …) and the Go API (client.Dial, worker.Connect) read their settings
// here, the way the stock `temporal` CLI does, through Temporal's environment
// configuration (go.temporal.io/sdk/contrib/envconfig). Each layer overrides
// the one before:
//
//  1. defaults: 127.0.0.1:7233, namespace default, no TLS;
//  2. a profile of the TOML file shared with the `temporal` CLI
//     (--config-file or TEMPORAL_CONFIG_FILE, else the user's
//     temporalio/temporal.toml; --profile or TEMPORAL_PROFILE, else "default");
//  3. the TEMPORAL_* environment variables (TEMPORAL_ADDRESS,
//     TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS, TEMPORAL_TLS_* …);
//  4. flags: --address --namespace --api-key --token-file --tls --tls-cert
//     --tls-key --tls-ca --tls-server-name --encryption-key-file.
//
// An API key is sent as "authorization: Bearer KEY" and turns TLS on unless
// TLS is turned off explicitly. A token file (--token-file,
// TOOLGATE_TOKEN_FILE: the worker token `toolgate dev` writes, for one) is
// sent the same way, read again whenever the file changes, and leaves TLS
// as the other settings say: plaintext to a plaintext dev server. With an encryption key file, every payload
// the client writes is encrypted (package encryption) and any it reads is
// decrypted. Nothing here prints or records a key: Describe names files and
// where a key came from, never a key.
package connect

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/toolgate/toolgate/authority"
	"github.com/toolgate/toolgate/encryption"
	"github.com/toolgate/toolgate/internal/private"
)

// Defaults when neither a profile, the environment nor a flag says.
const (
	DefaultAddress   = "127.0.0.1:7233"
	DefaultNamespace = "default"
)

// Settings say how to reach Temporal. The zero value reads the profile file
// and the environment and applies no overrides of its own.
type Settings struct {
	// Profile and ConfigFile choose the TOML profile (the `temporal` CLI's
	// --profile and --config-file); empty: TEMPORAL_PROFILE and
	// TEMPORAL_CONFIG_FILE, else "default" in the user's temporal.toml.
	Profile, ConfigFile string
	// Address and Namespace override the profile and the environment.
	Address, Namespace string
	// AuthorityNamespace is the namespace where only workers write (package
	// authority): uses claimed, the fleet ledger. Empty:
	// TOOLGATE_AUTHORITY_NAMESPACE (unless Isolated), else the namespace +
	// authority.Suffix.
	AuthorityNamespace string
	// APIKey overrides TEMPORAL_API_KEY and the profile's api_key.
	APIKey string
	// TokenFile is a file holding a bearer token (mode 0600), sent as
	// "authorization: Bearer TOKEN" on every call and read again when the
	// file changes; unlike an API key it does not turn TLS on. Empty:
	// TOOLGATE_TOKEN_FILE (unless Isolated). Not with an API key.
	TokenFile string
	// TLS, when set, turns TLS on (true) or off (false) whatever the profile
	// and the environment say. nil: TLS is on when a TLS setting or an API
	// key is given.
	TLS *bool
	// TLSCert and TLSKey are the client certificate and its key (PEM files),
	// for servers that require one (mTLS).
	TLSCert, TLSKey string
	// TLSCA is the CA (PEM) that signed the server's certificate, when the
	// system's roots do not hold it.
	TLSCA string
	// TLSServerName overrides the name the server's certificate is checked
	// against (and sent as SNI).
	TLSServerName string
	// EncryptionKeyFile is an encryption key file (`toolgate keys encryption
	// FILE`): payloads are encrypted with its newest key and decrypted with
	// any of its keys.
	EncryptionKeyFile string
	// Worker marks the settings of a worker. A worker must encrypt with a key
	// file of its own: a codec endpoint in the profile (which serves client
	// commands without a key file) is refused for a worker, which would
	// otherwise write plaintext.
	Worker bool
	// Isolated ignores the profile file and the TEMPORAL_* variables: only
	// the fields above count (toolgate dev's own worker, which must not be
	// pointed at another cluster by a profile meant for it).
	Isolated bool
	// Env looks up environment variables; nil: the process's.
	Env envconfig.EnvLookup
}

// AddFlags adds the connection flags to fs, over s (whose values are the
// flags' defaults).
func (s *Settings) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.Address, "address", s.Address, "Temporal frontend host:port (default: the profile's, $TEMPORAL_ADDRESS or "+DefaultAddress+")")
	fs.StringVar(&s.Namespace, "namespace", s.Namespace, "Temporal namespace (default: the profile's, $TEMPORAL_NAMESPACE or "+DefaultNamespace+")")
	fs.StringVar(&s.AuthorityNamespace, "authority-namespace", s.AuthorityNamespace, "the namespace only workers write, where uses are claimed and the fleet ledger lives (default: $TOOLGATE_AUTHORITY_NAMESPACE, else the namespace + "+authority.Suffix+")")
	fs.StringVar(&s.Profile, "profile", s.Profile, "profile of the Temporal config file, shared with the temporal CLI (default: $TEMPORAL_PROFILE or default)")
	fs.StringVar(&s.ConfigFile, "config-file", s.ConfigFile, "Temporal config file (TOML; default: $TEMPORAL_CONFIG_FILE or the temporal CLI's temporal.toml)")
	fs.StringVar(&s.APIKey, "api-key", s.APIKey, "API key, sent as authorization: Bearer KEY; turns TLS on (default: $TEMPORAL_API_KEY or the profile's; prefer the variable: a flag shows in the process list)")
	fs.StringVar(&s.TokenFile, "token-file", s.TokenFile, "send the bearer token in FILE (mode 0600; read again when it changes) as authorization: Bearer TOKEN, leaving TLS as it is: toolgate dev writes its worker token to DATA/auth/worker.token ($TOOLGATE_TOKEN_FILE)")
	fs.Var(&triBool{&s.TLS}, "tls", "TLS to the frontend: true or false (default: on when a TLS setting or an API key is given)")
	fs.StringVar(&s.TLSCert, "tls-cert", s.TLSCert, "client certificate (PEM) for mTLS ($TEMPORAL_TLS_CLIENT_CERT_PATH)")
	fs.StringVar(&s.TLSKey, "tls-key", s.TLSKey, "client certificate's key (PEM) for mTLS ($TEMPORAL_TLS_CLIENT_KEY_PATH)")
	fs.StringVar(&s.TLSCA, "tls-ca", s.TLSCA, "CA certificate (PEM) the server's certificate is checked with ($TEMPORAL_TLS_SERVER_CA_CERT_PATH; default: the system's)")
	fs.StringVar(&s.TLSServerName, "tls-server-name", s.TLSServerName, "server name to check the server's certificate against ($TEMPORAL_TLS_SERVER_NAME)")
	fs.StringVar(&s.EncryptionKeyFile, "encryption-key-file", s.EncryptionKeyFile, "encrypt payloads with this key file's newest key, decrypt with any (toolgate keys encryption FILE; mode 0600)")
}

// triBool is a flag that records whether it was given.
type triBool struct{ p **bool }

func (t *triBool) String() string {
	if t.p == nil || *t.p == nil {
		return ""
	}
	return strconv.FormatBool(**t.p)
}

func (t *triBool) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("want true or false, not %q", v)
	}
	*t.p = &b
	return nil
}

func (t *triBool) IsBoolFlag() bool { return true }

// Conn is a resolved connection: the SDK's client options and what they
// were made of.
type Conn struct {
	// Options are the SDK client options (HostPort, Namespace, TLS,
	// credentials, data and failure converters). Add a Logger,
	// MetricsHandler or Interceptors before dialing.
	Options client.Options
	// Keyring is the encryption key file's keys; nil without one.
	Keyring *encryption.Keyring
	// Profile is the profile file's profile that was read ("" when none).
	Profile string
	// AuthorityNamespace is the authority namespace (Settings.AuthorityNamespace).
	AuthorityNamespace string

	tls        bool
	tlsCert    string
	tlsCA      string
	apiKeyFrom string
	tokenFile  string
	keyFile    string
	remoteCode string // the profile's codec endpoint in use, if any
}

// Address is the frontend's host:port.
func (c *Conn) Address() string { return c.Options.HostPort }

// Namespace is the namespace.
func (c *Conn) Namespace() string { return c.Options.Namespace }

// Describe says where and how the connection goes, naming files and where a
// key came from, never a key: "127.0.0.1:7233 (namespace default; TLS, client
// certificate client.pem, CA ca.pem; API key from TEMPORAL_API_KEY; payloads
// encrypted with keys.json, newest key k1)".
func (c *Conn) Describe() string {
	var parts []string
	parts = append(parts, "namespace "+c.Namespace())
	if c.tls {
		t := "TLS"
		if c.tlsCert != "" {
			t += ", client certificate " + c.tlsCert
		}
		if c.tlsCA != "" {
			t += ", CA " + c.tlsCA
		}
		parts = append(parts, t)
	} else {
		parts = append(parts, "plaintext")
	}
	if c.apiKeyFrom != "" {
		parts = append(parts, "API key from "+c.apiKeyFrom)
	}
	if c.tokenFile != "" {
		parts = append(parts, "token from "+c.tokenFile)
	}
	switch {
	case c.Keyring != nil:
		parts = append(parts, fmt.Sprintf("payloads encrypted with %s, newest key %s", c.keyFile, c.Keyring.Newest()))
	case c.remoteCode != "":
		parts = append(parts, "payloads through the codec server "+c.remoteCode)
	}
	if c.Profile != "" {
		parts = append(parts, "profile "+c.Profile)
	}
	return c.Address() + " (" + strings.Join(parts, "; ") + ")"
}

// Resolve reads the profile file and the environment (unless Isolated),
// applies s over them, loads the encryption key file, and returns the
// client options. It dials nothing.
func (s Settings) Resolve() (*Conn, error) {
	env := s.Env
	if env == nil {
		env = envconfig.EnvLookupOS
	}
	var prof envconfig.ClientConfigProfile
	c := &Conn{}
	if !s.Isolated {
		var err error
		// Leniently: the file is shared with newer temporal CLIs, whose keys
		// this version may not know.
		prof, err = envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{
			ConfigFilePath: s.ConfigFile, ConfigFileProfile: s.Profile, EnvLookup: env,
		})
		if err != nil {
			return nil, fmt.Errorf("reading the Temporal connection profile: %w", err)
		}
		c.Profile = profileName(s, env)
	}
	c.apiKeyFrom = apiKeySource(s, env, prof.APIKey)
	if s.Address != "" {
		prof.Address = s.Address
	}
	if prof.Address == "" {
		prof.Address = DefaultAddress
	}
	if s.Namespace != "" {
		prof.Namespace = s.Namespace
	}
	if prof.Namespace == "" {
		prof.Namespace = DefaultNamespace
	}
	c.AuthorityNamespace = s.AuthorityNamespace
	if c.AuthorityNamespace == "" && !s.Isolated {
		c.AuthorityNamespace, _ = env.LookupEnv("TOOLGATE_AUTHORITY_NAMESPACE")
	}
	if c.AuthorityNamespace == "" {
		c.AuthorityNamespace = authority.Namespace(prof.Namespace)
	}
	if s.APIKey != "" {
		prof.APIKey = s.APIKey
	}
	if s.TLS != nil || s.TLSCert != "" || s.TLSKey != "" || s.TLSCA != "" || s.TLSServerName != "" {
		if prof.TLS == nil {
			prof.TLS = &envconfig.ClientConfigTLS{}
		}
		if s.TLS != nil {
			prof.TLS.Disabled = !*s.TLS
		}
		if s.TLSCert != "" {
			prof.TLS.ClientCertPath, prof.TLS.ClientCertData = s.TLSCert, nil
		}
		if s.TLSKey != "" {
			prof.TLS.ClientKeyPath, prof.TLS.ClientKeyData = s.TLSKey, nil
		}
		if s.TLSCA != "" {
			prof.TLS.ServerCACertPath, prof.TLS.ServerCACertData = s.TLSCA, nil
		}
		if s.TLSServerName != "" {
			prof.TLS.ServerName = s.TLSServerName
		}
	}
	if t := prof.TLS; t != nil && !t.Disabled {
		if (t.ClientCertPath != "" || len(t.ClientCertData) > 0) != (t.ClientKeyPath != "" || len(t.ClientKeyData) > 0) {
			return nil, errors.New("a client certificate needs its key and a key its certificate: give both --tls-cert and --tls-key (or TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH)")
		}
		c.tlsCert = orData(t.ClientCertPath, t.ClientCertData)
		c.tlsCA = orData(t.ServerCACertPath, t.ServerCACertData)
	}
	c.tls = (prof.TLS != nil && !prof.TLS.Disabled) || (prof.TLS == nil && prof.APIKey != "")

	remote := false
	if s.EncryptionKeyFile == "" && prof.Codec != nil && prof.Codec.Endpoint != "" {
		if s.Worker {
			return nil, fmt.Errorf("the profile names a codec endpoint (%s) but a worker encrypts with a key file of its own: give --encryption-key-file (a worker would otherwise write plaintext)", prof.Codec.Endpoint)
		}
		remote, c.remoteCode = true, prof.Codec.Endpoint
	}
	opts, err := prof.ToClientOptions(envconfig.ToClientOptionsRequest{IncludeRemoteCodec: remote})
	if err != nil {
		return nil, fmt.Errorf("the Temporal connection settings: %w", err)
	}
	if c.tokenFile = tokenFileOf(s, env); c.tokenFile != "" {
		if prof.APIKey != "" {
			return nil, fmt.Errorf("both an API key (from %s) and a token file (%s): give one", cmp.Or(c.apiKeyFrom, "the profile"), c.tokenFile)
		}
		tf := &tokenFile{path: c.tokenFile}
		if _, err := tf.token(context.Background()); err != nil {
			return nil, err
		}
		opts.Credentials = client.NewAPIKeyDynamicCredentials(tf.token)
		// The SDK turns TLS on for a key unless told it is off.
		opts.ConnectionOptions.TLSDisabled = !c.tls
	}
	if s.EncryptionKeyFile != "" {
		k, err := encryption.LoadKeyring(s.EncryptionKeyFile)
		if err != nil {
			return nil, err
		}
		c.Keyring, c.keyFile = k, s.EncryptionKeyFile
		opts.DataConverter, opts.FailureConverter = k.DataConverter(), k.FailureConverter()
	}
	c.Options = opts
	return c, nil
}

// profileName is the profile that was read, for Describe: "" when it is the
// implicit default.
func profileName(s Settings, env envconfig.EnvLookup) string {
	if s.Profile != "" {
		return s.Profile
	}
	if p, _ := env.LookupEnv("TEMPORAL_PROFILE"); p != "" {
		return p
	}
	return ""
}

// apiKeySource names where the API key in force came from ("" when none).
func apiKeySource(s Settings, env envconfig.EnvLookup, fromProfileOrEnv string) string {
	switch {
	case s.APIKey != "":
		return "--api-key"
	case s.Isolated || fromProfileOrEnv == "":
		return ""
	}
	if v, ok := env.LookupEnv("TEMPORAL_API_KEY"); ok && v == fromProfileOrEnv {
		return "TEMPORAL_API_KEY"
	}
	return "the profile"
}

// tokenFileOf is the token file in force: s.TokenFile, else
// TOOLGATE_TOKEN_FILE (unless Isolated).
func tokenFileOf(s Settings, env envconfig.EnvLookup) string {
	if s.TokenFile != "" || s.Isolated {
		return s.TokenFile
	}
	v, _ := env.LookupEnv("TOOLGATE_TOKEN_FILE")
	return v
}

// maxToken bounds a token file's size.
const maxToken = 16 << 10

// tokenFile reads a bearer token from a file, again whenever the file
// changes (its size or modification time): the dev server replaces its
// worker token file while it runs.
type tokenFile struct {
	path string

	mu      sync.Mutex
	mod     time.Time
	size    int64
	current string
}

// token is the file's token. Errors name the file, never a token.
func (f *tokenFile) token(context.Context) (string, error) {
	fi, err := os.Stat(f.path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.current != "" && fi.ModTime().Equal(f.mod) && fi.Size() == f.size {
		return f.current, nil
	}
	data, err := private.ReadFile(f.path, maxToken)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("token file %s: want one token on one line", f.path)
	}
	f.current, f.mod, f.size = tok, fi.ModTime(), fi.Size()
	return tok, nil
}

func orData(path string, data []byte) string {
	switch {
	case path != "":
		return path
	case len(data) > 0:
		return "(inline PEM)"
	}
	return ""
}

// Dial resolves s and connects, checking that the server answers. edit, if
// not nil, adjusts the options first (logger, metrics, interceptors). A
// failure names where it tried and, for the usual mistakes, what to change.
func Dial(ctx context.Context, s Settings, edit func(*client.Options)) (client.Client, *Conn, error) {
	c, err := s.Resolve()
	if err != nil {
		return nil, nil, err
	}
	opts := c.Options
	if edit != nil {
		edit(&opts)
	}
	tc, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, nil, Explain(c, err)
	}
	return tc, c, nil
}

// DialAuthority makes the client of the authority namespace over tc's
// connection (tc must have been dialled with c), and checks that the
// namespace exists, saying how to make it when it does not. edit, if not
// nil, adjusts the options first, as for Dial.
func (c *Conn) DialAuthority(ctx context.Context, tc client.Client, edit func(*client.Options)) (*authority.Conn, error) {
	opts := c.Options
	opts.Namespace = c.AuthorityNamespace
	if edit != nil {
		edit(&opts)
	}
	ac, err := client.NewClientFromExistingWithContext(ctx, tc, opts)
	if err != nil {
		return nil, fmt.Errorf("the authority namespace %s: %w", c.AuthorityNamespace, err)
	}
	if err := authority.Check(ctx, ac, c.AuthorityNamespace); err != nil {
		ac.Close()
		return nil, err
	}
	return &authority.Conn{Client: ac, Namespace: c.AuthorityNamespace}, nil
}
