// Package notify tells approvers that a call waits, and what became of it:
// a signed JSON webhook, a Slack message with Approve / Reject / Open
// buttons, an e-mail. A run delivers each notification through the notify
// activity (Sender.Deliver), so a delivery is retried, keyed and recorded in
// the run's trace; nothing here decides a call. Answers come back through
// package confirm: a link's confirm page, and Slack's interactivity endpoint.
package notify

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// MaxFileSize is the largest notify file Load reads.
const MaxFileSize = 256 << 10

// MaxAttemptTimeout bounds a target's timeout: four attempts of it, and the
// waits between them, fit the run's bound on a delivery
// (workflows.NotifyDeadline).
const MaxAttemptTimeout = 30 * time.Second

// MaxTargets bounds a notify file's targets: each event of a run schedules
// one delivery per target, and each is kept in the run's history.
const MaxTargets = 16

// Kinds of target.
const (
	KindWebhook = "webhook"
	KindSlack   = "slack"
	KindEmail   = "email"
)

// DefaultSlackResponsePrefix is where Slack's response_url points; the
// interactivity endpoint posts a message's update to no other place.
const DefaultSlackResponsePrefix = "https://hooks.slack.com/"

// Config is a notify file: its targets, the events each takes, and where
// links point.
type Config struct {
	Targets []Target `yaml:"targets"`
	// Events are the events every target takes unless it names its own
	// (default: all of workflows.NotifyEvents).
	Events []string `yaml:"events"`
	// LinkBase is where the inbox listener is reachable ("https://toolgate.example"):
	// links to confirm pages start with it. Empty: notifications carry no
	// link and Slack messages no buttons.
	LinkBase string `yaml:"link_base"`
	// LinkKeyFile is the Ed25519 private key (toolgate keys new) that signs
	// links and, under a policy whose link_key is its public key, the
	// decisions approvers make by link. Required with link_base.
	LinkKeyFile string `yaml:"link_key_file"`

	linkKey ed25519.PrivateKey
}

// Target is one place notifications go. Exactly one of Webhook, Slack and
// SMTP is set.
type Target struct {
	Name string `yaml:"name"`
	// Events overrides Config.Events for this target.
	Events []string `yaml:"events"`
	// Timeout bounds one attempt ("10s", the default).
	Timeout string `yaml:"timeout"`

	// Webhook is a URL that takes a signed JSON POST; Secret signs it
	// (X-Toolgate-Signature) and is required.
	Webhook string `yaml:"webhook"`
	Secret  string `yaml:"secret"`

	// Slack is an incoming-webhook URL; SigningSecret is the Slack app's,
	// which the interactivity endpoint checks every click against (with
	// none, every click is refused). ResponseURLPrefix is where a click's
	// response_url may point (DefaultSlackResponsePrefix).
	Slack             string `yaml:"slack"`
	SigningSecret     string `yaml:"signing_secret"`
	ResponseURLPrefix string `yaml:"response_url_prefix"`

	// SMTP is HOST:PORT of a mail server that speaks STARTTLS (always
	// required); From the sender; User and Password its credentials (from the
	// environment: ${SMTP_PASSWORD}); To are addresses that get every
	// notification besides the approvers the call needs; CAFile a PEM file
	// of the CAs to trust instead of the system's.
	SMTP     string   `yaml:"smtp"`
	From     string   `yaml:"from"`
	User     string   `yaml:"user"`
	Password string   `yaml:"password"`
	To       []string `yaml:"to"`
	CAFile   string   `yaml:"ca_file"`
}

// Kind says which kind of target t is.
func (t Target) Kind() string {
	switch {
	case t.Webhook != "":
		return KindWebhook
	case t.Slack != "":
		return KindSlack
	case t.SMTP != "":
		return KindEmail
	}
	return ""
}

// AttemptTimeout is how long one attempt may take.
func (t Target) AttemptTimeout() time.Duration {
	d, err := time.ParseDuration(t.Timeout)
	if err != nil || d <= 0 {
		return 10 * time.Second
	}
	return d
}

// Load reads the notify file at path, expanding ${VAR} from the
// environment (a variable that is not set is an error: a secret left empty
// would silently turn a check off), and checks it.
func Load(path string) (*Config, error) { return LoadWith(path, os.LookupEnv) }

// LoadWith is Load with ${VAR} looked up by lookup.
func LoadWith(path string, lookup func(string) (string, bool)) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("notify file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("notify file %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("notify file %s: larger than %d bytes", path, MaxFileSize)
	}
	c, err := Parse(data, lookup)
	if err != nil {
		return nil, fmt.Errorf("notify file %s: %w", path, err)
	}
	if c.LinkKeyFile != "" {
		if c.linkKey, err = signed.ReadPrivateKey(c.LinkKeyFile); err != nil {
			return nil, fmt.Errorf("notify file %s: link_key_file: %w", path, err)
		}
	}
	return c, nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// Parse reads a notify file's text strictly (unknown keys refused),
// expanding ${VAR} with lookup in its values (never in keys or comments: a
// value cannot change the file's shape), and checks it. It reads no key
// file (Load does; SetLinkKey sets one).
func Parse(data []byte, lookup func(string) (string, bool)) (*Config, error) {
	// Unknown keys first, on the text as written (its line numbers).
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(new(Config)); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty notify file: want targets")
		}
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("not a mapping: want targets")
	}
	var missing []string
	expand(&doc, func(name string) string {
		v, ok := lookup(name)
		if !ok || v == "" {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("environment variables not set (or empty): %s", strings.Join(slices.Compact(missing), ", "))
	}
	var c Config
	if err := doc.Decode(&c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// expand replaces ${VAR} in every scalar value under n (mapping keys are
// left alone).
func expand(n *yaml.Node, get func(string) string) {
	switch n.Kind {
	case yaml.ScalarNode:
		if envRef.MatchString(n.Value) {
			n.Value = envRef.ReplaceAllStringFunc(n.Value, func(m string) string { return get(envRef.FindStringSubmatch(m)[1]) })
			n.Tag, n.Style = "!!str", yaml.DoubleQuotedStyle
		}
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			expand(n.Content[i], get)
		}
	default:
		for _, c := range n.Content {
			expand(c, get)
		}
	}
}

var targetName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// Validate checks the file: named targets of exactly one kind each, known
// events, a secret for every webhook, https URLs (http only to a loopback
// host), addresses that parse, and a link key with link_base.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch n := len(c.Targets); {
	case n == 0:
		bad("targets: none; a notify file needs at least one")
	case n > MaxTargets:
		bad("targets: %d, at most %d (each event of a run is one delivery per target, kept in its history)", n, MaxTargets)
	}
	if err := checkEvents("events", c.Events); err != nil {
		errs = append(errs, err)
	}
	seen := map[string]bool{}
	for i, t := range c.Targets {
		at := fmt.Sprintf("targets[%d]", i)
		if !targetName.MatchString(t.Name) {
			bad("%s.name %q: want 1-32 of a-z, 0-9, _ and -", at, t.Name)
		} else if seen[t.Name] {
			bad("%s.name %q: given twice", at, t.Name)
		}
		seen[t.Name] = true
		n := 0
		for _, s := range []string{t.Webhook, t.Slack, t.SMTP} {
			if s != "" {
				n++
			}
		}
		if n != 1 {
			bad("%s (%s): want exactly one of webhook, slack and smtp", at, t.Name)
			continue
		}
		if err := checkEvents(at+".events", t.Events); err != nil {
			errs = append(errs, err)
		}
		if t.Timeout != "" {
			if d, err := time.ParseDuration(t.Timeout); err != nil || d <= 0 || d > MaxAttemptTimeout {
				bad("%s.timeout %q: want a duration up to %s", at, t.Timeout, MaxAttemptTimeout)
			}
		}
		switch t.Kind() {
		case KindWebhook:
			if err := checkURL(t.Webhook); err != nil {
				bad("%s.webhook: %v", at, err)
			}
			if t.Secret == "" {
				bad("%s.secret: required: every webhook delivery is signed (X-Toolgate-Signature), and a receiver must check it", at)
			}
		case KindSlack:
			if err := checkURL(t.Slack); err != nil {
				bad("%s.slack: %v", at, err)
			}
			if t.ResponseURLPrefix != "" {
				if err := checkURL(t.ResponseURLPrefix); err != nil {
					bad("%s.response_url_prefix: %v", at, err)
				}
			}
		case KindEmail:
			if _, _, err := splitHostPort(t.SMTP); err != nil {
				bad("%s.smtp %q: want HOST:PORT", at, t.SMTP)
			}
			if _, err := mail.ParseAddress(t.From); err != nil {
				bad("%s.from %q: %v", at, t.From, err)
			}
			if (t.User == "") != (t.Password == "") {
				bad("%s: user and password go together", at)
			}
			for j, a := range t.To {
				if _, err := mail.ParseAddress(a); err != nil {
					bad("%s.to[%d] %q: %v", at, j, a, err)
				}
			}
		}
		if t.Kind() != KindWebhook && t.Secret != "" {
			bad("%s.secret: only a webhook takes one (a Slack app's is signing_secret)", at)
		}
		if t.Kind() != KindSlack && (t.SigningSecret != "" || t.ResponseURLPrefix != "") {
			bad("%s: signing_secret and response_url_prefix belong to a slack target", at)
		}
	}
	if c.LinkBase != "" {
		if err := checkURL(c.LinkBase); err != nil {
			bad("link_base: %v", err)
		}
		if c.LinkKeyFile == "" {
			bad("link_key_file: required with link_base: links and the decisions made through them are signed with it (toolgate keys new link)")
		}
	}
	return errors.Join(errs...)
}

func checkEvents(at string, events []string) error {
	for _, e := range events {
		if !slices.Contains(workflows.NotifyEvents, e) {
			return fmt.Errorf("%s: unknown event %q (want %s)", at, e, strings.Join(workflows.NotifyEvents, ", "))
		}
	}
	return nil
}

// checkURL accepts an absolute https URL, or http to a loopback host. Its
// errors never quote the URL: a webhook's or Slack's URL is a credential.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("does not parse as a URL (not shown: it may hold a secret)")
	}
	switch {
	case u.Host == "":
		return errors.New("want an absolute URL (not shown: it may hold a secret)")
	case u.User != nil:
		return errors.New("the URL holds credentials (not shown): put a webhook's in its secret")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("want https (http only to a loopback address), not %s to %s", u.Scheme, u.Hostname())
}

// SetLinkKey sets the key that signs links (Load reads it from link_key_file).
func (c *Config) SetLinkKey(k ed25519.PrivateKey) { c.linkKey = k }

// LinkKey is the key that signs links; nil if the file sets none.
func (c *Config) LinkKey() ed25519.PrivateKey { return c.linkKey }

// TargetEvents is the events target t takes.
func (c *Config) TargetEvents(t Target) []string {
	switch {
	case t.Events != nil:
		return t.Events
	case c.Events != nil:
		return c.Events
	}
	return workflows.NotifyEvents
}

// Declared is what the worker tells its runs of the targets: names, kinds
// and events, never an address or a secret.
func (c *Config) Declared() []workflows.NotifyTarget {
	var out []workflows.NotifyTarget
	for _, t := range c.Targets {
		out = append(out, workflows.NotifyTarget{Name: t.Name, Kind: t.Kind(), Events: slices.Clone(c.TargetEvents(t))})
	}
	return out
}

// Target returns the target named name.
func (c *Config) Target(name string) (Target, bool) {
	for _, t := range c.Targets {
		if t.Name == name {
			return t, true
		}
	}
	return Target{}, false
}

// SlackSigningSecrets are the signing secrets of the Slack targets that set
// one: a click verified by none of them is refused.
func (c *Config) SlackSigningSecrets() []string {
	var out []string
	for _, t := range c.Targets {
		if t.Kind() == KindSlack && t.SigningSecret != "" {
			out = append(out, t.SigningSecret)
		}
	}
	return out
}

// SlackResponsePrefixes are where a Slack click's response_url may point.
func (c *Config) SlackResponsePrefixes() []string {
	var out []string
	for _, t := range c.Targets {
		if t.Kind() == KindSlack {
			p := t.ResponseURLPrefix
			if p == "" {
				p = DefaultSlackResponsePrefix
			}
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}
