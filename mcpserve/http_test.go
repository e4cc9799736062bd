package mcpserve

import (
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestBearerTokenMissingOrWrongIs401(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct {
		name, auth, why string
	}{
		{"missing", "", "no bearer token"},
		{"wrong", "Bearer tg_" + strings.Repeat("A", 43), "unknown bearer token"},
		{"not bearer", "Basic " + h.alice, "no bearer token"},
	} {
		hdr := map[string]string{}
		if tc.auth != "" {
			hdr["Authorization"] = tc.auth
		}
		resp, body := h.raw(t, "POST", Path, hdr, initBody)
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") || !strings.Contains(body, tc.why) {
			t.Errorf("%s token: %d, WWW-Authenticate %q, body %s: want 401 saying %q", tc.name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body, tc.why)
		}
	}
	resp, body := h.raw(t, "POST", Path, map[string]string{"Authorization": "Bearer " + h.alice}, initBody)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("alice's token: %d %s, want 200", resp.StatusCode, body)
	}
}

func TestSessionOfAnotherTokenIs403(t *testing.T) {
	h := newHarness(t, nil)
	cs := h.connect(t, h.alice, nil, nil)
	hdr := map[string]string{"Authorization": "Bearer " + h.bob, sessionHeader: cs.ID()}
	resp, body := h.raw(t, "POST", Path, hdr, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "another token") {
		t.Errorf("bob on alice's session: %d %s, want 403 saying why", resp.StatusCode, body)
	}
	hdr["Authorization"] = "Bearer " + h.alice
	if resp, body := h.raw(t, "POST", Path, hdr, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusOK {
		t.Errorf("alice on her session: %d %s", resp.StatusCode, body)
	}
}

func TestSessionsPerTokenAreBounded(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxSessionsPerToken = 1 })
	h.connect(t, h.alice, nil, nil)
	resp, body := h.raw(t, "POST", Path, map[string]string{"Authorization": "Bearer " + h.alice}, initBody)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "at most 1") {
		t.Errorf("alice's second session: %d %s, want 429 saying why", resp.StatusCode, body)
	}
	h.connect(t, h.bob, nil, nil) // another token has sessions of its own
}

func TestHostOriginAndPathAreChecked(t *testing.T) {
	h := newHarness(t, nil)
	auth := "Bearer " + h.alice
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		path string
		code int
		why  string
	}{
		{"bad host", map[string]string{"Host": "evil.example:80"}, Path, 403, "not one this server answers to"},
		{"bad port", map[string]string{"Host": "127.0.0.1:1"}, Path, 403, "not one this server answers to"},
		{"bad origin", map[string]string{"Origin": "https://evil.example"}, Path, 403, "origin"},
		{"null origin", map[string]string{"Origin": "null"}, Path, 403, "origin"},
		{"other path", nil, "/other", 404, "/mcp"},
		{"allowed origin", map[string]string{"Origin": "https://APP.example"}, Path, 200, ""},
		{"localhost", map[string]string{"Host": "localhost:" + h.host[strings.LastIndex(h.host, ":")+1:]}, Path, 200, ""},
	} {
		hdr := map[string]string{"Authorization": auth}
		for k, v := range tc.hdr {
			hdr[k] = v
		}
		resp, body := h.raw(t, "POST", tc.path, hdr, initBody)
		if resp.StatusCode != tc.code || !strings.Contains(strings.ToLower(body), tc.why) {
			t.Errorf("%s: %d %s, want %d saying %q", tc.name, resp.StatusCode, body, tc.code, tc.why)
		}
	}
}

func TestTokensFileReadableByOthersIsRefused(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permission bits")
	}
	file := filepath.Join(t.TempDir(), "tokens.json")
	if _, err := NewToken(file, "alice", ""); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new tokens file: mode %v, %v; want 0600", fi.Mode(), err)
	}
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTokens(file); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a 0644 tokens file: %v, want a refusal saying chmod 600", err)
	}
	if _, err := NewToken(file, "bob", ""); err == nil {
		t.Error("a token added to a 0644 tokens file")
	}
}

func TestTokenRoundTrip(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sub", "tokens.json")
	alice, err := NewToken(file, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := NewToken(file, "bob@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(alice, TokenPrefix) || len(alice) != 46 {
		t.Errorf("token %q: want tg_ and 43 base64url characters", alice)
	}
	data, _ := os.ReadFile(file)
	if strings.Contains(string(data), alice[3:]) {
		t.Error("the tokens file holds the token itself")
	}
	toks, err := LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := toks.Lookup(alice); !ok || e.Name != "alice" {
		t.Errorf("alice's token: %v %v", e, ok)
	}
	if e, ok := toks.Lookup(bob); !ok || e.Name != "bob@example.com" {
		t.Errorf("bob's token: %v %v", e, ok)
	}
	for _, wrong := range []string{"", "tg_", alice + "x", alice[:45], strings.Repeat("x", 300)} {
		if _, ok := toks.Lookup(wrong); ok {
			t.Errorf("token %.20q found", wrong)
		}
	}
	again, err := NewToken(file, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	toks, _ = LoadTokens(file)
	if _, ok := toks.Lookup(alice); ok {
		t.Error("alice's replaced token still works")
	}
	if _, ok := toks.Lookup(again); !ok || len(toks.Entries()) != 2 {
		t.Errorf("alice's new token: %v, %d entries", ok, len(toks.Entries()))
	}
}

func TestTokenNamesAreChecked(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens.json")
	for _, bad := range []string{"", "-a", "a b", "a/b", strings.Repeat("a", 65)} {
		if _, err := NewToken(file, bad, ""); err == nil {
			t.Errorf("name %q taken", bad)
		}
	}
	if _, err := NewToken(file, "a", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := NewToken(file, "a-b", ""); err == nil || !strings.Contains(err.Error(), "followed by '-'") {
		t.Errorf("a and a-b: %v, want a refusal (mcp-a-b-x is either's)", err)
	}
	if _, err := NewToken(file, "x", filepath.Join(t.TempDir(), "nokey")); err == nil {
		t.Error("a missing key file taken")
	}
	clashing := filepath.Join(t.TempDir(), "clash.json")
	h := strings.Repeat("0", 64)
	if err := os.WriteFile(clashing, []byte(`{"tokens":[{"name":"a","sha256":"`+h+`"},{"name":"a-b","sha256":"`+h+`"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTokens(clashing); err == nil || !strings.Contains(err.Error(), "followed by '-'") {
		t.Errorf("a file with a and a-b: %v, want a refusal", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"tokens":[{"name":"a","sha256":"tg_secret"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTokens(bad); err == nil || !strings.Contains(err.Error(), "not the token itself") {
		t.Errorf("a token in place of its hash: %v", err)
	}
}

// A request body past MaxRequestBytes is refused (413) before it is read
// whole; a small one is read.
func TestRequestBodyIsBounded(t *testing.T) {
	h := newHarness(t, nil)
	hdr := map[string]string{"Authorization": "Bearer " + h.alice}
	big := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", MaxRequestBytes) + `"}}`
	if resp, body := h.raw(t, "POST", Path, hdr, big); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a %d-byte request: %d %s, want 413", len(big), resp.StatusCode, body)
	}
	if resp, body := h.raw(t, "POST", Path, hdr, initBody); resp.StatusCode != http.StatusOK {
		t.Errorf("initialize: %d %s", resp.StatusCode, body)
	}
}
