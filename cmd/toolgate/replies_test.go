package main

import (
	"crypto/ed25519"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
)

// The inbox's listener hands the confirm page and the Slack endpoint to
// package confirm; with --replies-only it serves nothing else, so a
// listener the internet reaches lists no waiting call and decides none.
func TestRepliesBesideOrInsteadOfTheInbox(t *testing.T) {
	cfg, err := notify.Parse([]byte(`targets: [{name: ops, webhook: "https://h.example/x", secret: s}]`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	inbox := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	status := func(h http.Handler, method, path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, "http://127.0.0.1"+path, nil))
		return rec.Code
	}
	for _, only := range []bool{false, true} {
		h := (&replies{notify: cfg, only: only}).around(inbox, nil, nil)
		inboxWant := http.StatusTeapot
		if only {
			inboxWant = http.StatusNotFound
		}
		for _, path := range []string{"/", "/api/pending", "/app.js"} {
			if got := status(h, http.MethodGet, path); got != inboxWant {
				t.Errorf("only=%v: GET %s: %d, want %d", only, path, got, inboxWant)
			}
		}
		if got := status(h, http.MethodPost, "/api/decide"); got != inboxWant {
			t.Errorf("only=%v: POST /api/decide: %d, want %d", only, got, inboxWant)
		}
		if got := status(h, http.MethodGet, "/confirm"); got == http.StatusTeapot || got == http.StatusNotFound {
			t.Errorf("only=%v: GET /confirm went to %d, want the confirm page's refusal of a missing link", only, got)
		}
		if got := status(h, http.MethodPost, "/slack/interactions"); got != http.StatusUnauthorized {
			t.Errorf("only=%v: POST /slack/interactions: %d, want 401 (no signing secret configured)", only, got)
		}
	}
	if h := (*replies)(nil).around(inbox, nil, nil); status(h, http.MethodGet, "/confirm") != http.StatusTeapot {
		t.Error("without --notify the inbox serves every path")
	}
}

// The via key is the listener's own: the link key the workers hold, or a
// key the policy does not name as its via_key, is refused, saying why.
func TestViaKeyIsTheListenersOwn(t *testing.T) {
	dir := t.TempDir()
	write := func(name string) (string, ed25519.PrivateKey) {
		_, priv, err := signed.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := signed.WritePrivateKey(path, priv); err != nil {
			t.Fatal(err)
		}
		return path, priv
	}
	linkFile, link := write("link.key")
	viaFile, via := write("via.key")
	pub := func(k ed25519.PrivateKey) string { return signed.FormatPublicKey(k.Public().(ed25519.PublicKey)) }
	cfg, err := notify.Parse([]byte(`targets: [{name: ops, webhook: "https://h.example/x", secret: s}]`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.SetLinkKey(link)
	pol := func(viaKey string) *policy.Policy {
		_, a, _ := signed.GenerateKey()
		p, err := policy.Parse([]byte("via_key: \"" + viaKey + "\"\napprovers:\n  alice: {key: \"" + pub(a) + "\", email: a@example.com, via: [email]}\n"))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if k, err := loadViaKey(viaFile, cfg, pol(pub(via))); err != nil || !k.Equal(via) {
		t.Fatalf("the policy's via key: %v", err)
	}
	for what, c := range map[string]struct {
		file string
		pol  *policy.Policy
		want string
	}{
		"the link key":   {linkFile, pol(pub(link)), "--via-key is notify's link key"},
		"another key":    {viaFile, pol(pub(link)), "--via-key is not the policy's via_key"},
		"no policy":      {viaFile, nil, "--via-key goes with --policy"},
		"not a key file": {filepath.Join(dir, "none.key"), pol(pub(via)), "--via-key:"},
	} {
		if _, err := loadViaKey(c.file, cfg, c.pol); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", what, err, c.want)
		}
	}
}
