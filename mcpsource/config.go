// Package mcpsource puts the tools of Model Context Protocol servers behind
// toolgate's gate: it connects to each server an --mcp file names (stdio or
// streamable HTTP, with the official Go SDK as the client), lists its tools
// and registers each as a toolgate tool named <server>__<tool>, with the
// server's input schema and description. The operator's file — never the
// server — says which tools are destructive: a tool it does not declare is
// destructive (gated, never memoized), unless the file trusts the server's
// annotations and the tool says readOnlyHint true and destructiveHint false.
package mcpsource

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is an --mcp file.
type Config struct {
	Servers map[string]ServerConfig `yaml:"servers" json:"servers"`
}

// ServerConfig is one server: a command to run (stdio) or a URL
// (streamable HTTP), and the operator's declarations of its tools.
type ServerConfig struct {
	// Command runs the server and talks to it over stdin/stdout.
	Command []string `yaml:"command" json:"command,omitempty"`
	// URL is a streamable-HTTP endpoint.
	URL string `yaml:"url" json:"url,omitempty"`
	// Headers are sent with every HTTP request; ${VAR} is taken from the
	// worker's environment when it connects (never written anywhere).
	Headers map[string]string `yaml:"headers" json:"headers,omitempty"`
	// Env is added to the command's environment (${VAR} expanded likewise).
	Env map[string]string `yaml:"env" json:"env,omitempty"`
	// Tools are the operator's declarations, which win over anything the server says.
	Tools map[string]ToolConfig `yaml:"tools" json:"tools,omitempty"`
	// TrustAnnotations lets a tool the file does not declare be a read when
	// the server annotates it readOnlyHint true and destructiveHint false.
	TrustAnnotations bool `yaml:"trust_annotations" json:"trust_annotations,omitempty"`
	// Sessions bounds the sessions open to the server at once, each serving
	// one call at a time (for a command, each is a process of its own): 1 to
	// MaxSessions; 0 means DefaultSessions.
	Sessions int `yaml:"sessions" json:"sessions,omitempty"`
	// ConnectTimeout bounds connecting to the server (its answer to
	// initialize) and, when the worker starts or `mcp list` runs, listing its
	// tools: a Go duration ("30s", "2m") up to MaxConnectTimeout; empty means
	// DefaultConnectTimeout.
	ConnectTimeout string `yaml:"connect_timeout" json:"connect_timeout,omitempty"`
}

// Bounds of a server's connect_timeout.
const (
	DefaultConnectTimeout = 30 * time.Second
	MaxConnectTimeout     = 10 * time.Minute
)

// connectTimeout is the server's connect_timeout (Validate has checked it).
func (s ServerConfig) connectTimeout() time.Duration {
	if d, err := time.ParseDuration(s.ConnectTimeout); err == nil && d > 0 {
		return d
	}
	return DefaultConnectTimeout
}

// ToolConfig declares one tool of a server.
type ToolConfig struct {
	// Destructive: gated and never memoized (true), or a read (false).
	Destructive *bool `yaml:"destructive" json:"destructive,omitempty"`
	// Local runs a read as a local activity.
	Local bool `yaml:"local" json:"local,omitempty"`
	// InvalidatedBy narrows which of the server's destructive tools drop this
	// read's memoized results (by default every one of them does).
	InvalidatedBy []string `yaml:"invalidated_by" json:"invalidated_by,omitempty"`
}

var serverName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,23}$`)

// Load reads and checks an --mcp file (YAML or JSON).
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the MCP file: %w", err)
	}
	c, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse reads an --mcp file strictly (unknown keys and duplicate keys are
// refused) and checks it.
func Parse(raw []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("MCP file: %w", err)
	}
	return &c, c.Validate()
}

// Validate checks server names (lower case letters, digits and '-', so that
// <server>__<tool> parts never run together), that each server has exactly
// one of command and url, a connect_timeout and a sessions bound in range,
// and that every
// invalidated_by names a tool the file declares destructive.
func (c *Config) Validate() error {
	if len(c.Servers) == 0 {
		return fmt.Errorf("MCP file: no servers")
	}
	var errs []string
	for _, name := range slices.Sorted(maps.Keys(c.Servers)) {
		s := c.Servers[name]
		if !serverName.MatchString(name) {
			errs = append(errs, fmt.Sprintf("servers.%s: a server name is a lower-case letter, then at most 23 letters, digits or '-'", name))
		}
		if (len(s.Command) == 0) == (s.URL == "") {
			errs = append(errs, fmt.Sprintf("servers.%s: give exactly one of command (stdio) and url (streamable HTTP)", name))
		}
		if s.URL != "" && !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
			errs = append(errs, fmt.Sprintf("servers.%s.url: want http:// or https://", name))
		}
		if s.ConnectTimeout != "" {
			if d, err := time.ParseDuration(s.ConnectTimeout); err != nil || d <= 0 || d > MaxConnectTimeout {
				errs = append(errs, fmt.Sprintf("servers.%s.connect_timeout: %q is not a duration above 0s and up to %v (e.g. \"30s\")", name, s.ConnectTimeout, MaxConnectTimeout))
			}
		}
		if s.Sessions < 0 || s.Sessions > MaxSessions {
			errs = append(errs, fmt.Sprintf("servers.%s.sessions: %d is outside 1..%d (leave it out for %d)", name, s.Sessions, MaxSessions, DefaultSessions))
		}
		for _, tn := range slices.Sorted(maps.Keys(s.Tools)) {
			t := s.Tools[tn]
			if t.Local && (t.Destructive == nil || *t.Destructive) {
				errs = append(errs, fmt.Sprintf("servers.%s.tools.%s: local is for reads: declare destructive: false too", name, tn))
			}
			for _, w := range t.InvalidatedBy {
				if d := s.Tools[w].Destructive; d == nil || !*d {
					errs = append(errs, fmt.Sprintf("servers.%s.tools.%s.invalidated_by: %s is not declared destructive: true in this file", name, tn, w))
				}
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("MCP file: %s", strings.Join(errs, "; "))
	}
	return nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expand replaces each ${VAR} with getenv(VAR) (any other $ stays as it is)
// and says which were empty.
func expand(s string, getenv func(string) string) (string, []string) {
	var missing []string
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		k := envRef.FindStringSubmatch(ref)[1]
		v := getenv(k)
		if v == "" {
			missing = append(missing, k)
		}
		return v
	})
	return out, missing
}
