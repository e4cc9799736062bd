package webguard

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"
)

func TestHostAllowed(t *testing.T) {
	allowed := []string{"127.0.0.1:8080", "[::1]:8080", "mcp.example", "localhost"}
	for host, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.0.0.1:8081": false, "[::1]:8080": true, "MCP.example:443": true,
		"mcp.example.": true, "evil.example": false, "": false, "127.0.0.1": false, "[::1]:8081": false,
		"LOCALHOST:1234": true, "mcp.example.evil.test": false,
	} {
		if got := HostAllowed(allowed, host); got != want {
			t.Errorf("host %q: allowed %v, want %v", host, got, want)
		}
	}
}

func TestNormalOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://App.Example": "https://app.example", "https://app.example:443": "https://app.example",
		"http://app.example:80/": "http://app.example", "http://[::1]:80": "http://[::1]", "http://app.example:8080": "http://app.example:8080",
	} {
		if got, err := NormalOrigin(in); err != nil || got != want {
			t.Errorf("NormalOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"app.example", "ftp://app.example", "https://app.example/path", "https://u@app.example", "https://app.example?q", "null"} {
		if got, err := NormalOrigin(bad); err == nil {
			t.Errorf("NormalOrigin(%q) = %q, want a refusal", bad, got)
		}
	}
}

func TestOwnOriginAndLoopbackHosts(t *testing.T) {
	r := httptest.NewRequest("GET", "http://127.0.0.1:8090/", nil)
	if got := OwnOrigin(r); got != "http://127.0.0.1:8090" {
		t.Errorf("OwnOrigin = %q", got)
	}
	r = httptest.NewRequest("GET", "https://chat.example:443/", nil)
	r.TLS = &tls.ConnectionState{}
	if got := OwnOrigin(r); got != "https://chat.example" {
		t.Errorf("OwnOrigin over TLS = %q", got)
	}
	got := LoopbackHosts("127.0.0.1:8090")
	want := []string{"127.0.0.1:8090", "localhost:8090", "[::1]:8090"}
	if len(got) != len(want) {
		t.Fatalf("LoopbackHosts = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("LoopbackHosts = %q, want %q", got, want)
		}
	}
}

func TestIPOrNamed(t *testing.T) {
	names := []string{"Toolgate.Example.", "inbox.internal:8443"}
	for got, want := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:8080": true, "10.0.0.7": true, "localhost:80": true,
		"toolgate.example": true, "TOOLGATE.example.:443": true, "inbox.internal:9": true,
		"evil.example": false, "toolgate.example.evil.example": false, "": false, ":8080": false,
	} {
		if IPOrNamed(names, got) != want {
			t.Errorf("IPOrNamed(%q) = %v, want %v", got, !want, want)
		}
	}
}
