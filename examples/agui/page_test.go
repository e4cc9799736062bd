package aguipage

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, method, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	res := rec.Result()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

func TestHandlerServesThePageUnderCSP(t *testing.T) {
	for path, want := range map[string]string{
		"/":          "text/html; charset=utf-8",
		"/app.js":    "text/javascript; charset=utf-8",
		"/style.css": "text/css; charset=utf-8",
	} {
		res, body := get(t, http.MethodGet, path)
		if res.StatusCode != http.StatusOK || body == "" {
			t.Errorf("GET %s: %s, %d bytes", path, res.Status, len(body))
		}
		if got := res.Header.Get("Content-Type"); got != want {
			t.Errorf("GET %s: Content-Type %q, want %q", path, got, want)
		}
		if got := res.Header.Get("Content-Security-Policy"); got != CSP {
			t.Errorf("GET %s: Content-Security-Policy %q, want %q", path, got, CSP)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no X-Content-Type-Options: nosniff", path)
		}
	}
	if !strings.Contains(CSP, "script-src 'self'") || strings.Contains(CSP, "unsafe-inline") {
		t.Errorf("CSP %q must allow only the page's own script", CSP)
	}
	for _, path := range []string{"/index.html", "/agui", "/x.js", "/app.js/", "/../page.go", "/page.go"} {
		if res, _ := get(t, http.MethodGet, path); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", path, res.Status)
		}
	}
	if res, _ := get(t, http.MethodPost, "/"); res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %s, want 405", res.Status)
	}
	if res, body := get(t, http.MethodHead, "/app.js"); res.StatusCode != http.StatusOK || body != "" {
		t.Errorf("HEAD /app.js: %s, %d bytes", res.Status, len(body))
	}
}

// The CSP forbids inline script and handlers; the page must need neither.
func TestIndexHasNoInlineScript(t *testing.T) {
	_, html := get(t, http.MethodGet, "/")
	scripts := regexp.MustCompile(`(?is)<script\b([^>]*)>(.*?)</script>`).FindAllStringSubmatch(html, -1)
	if len(scripts) != 1 {
		t.Fatalf("index.html has %d script elements, want exactly one (app.js)", len(scripts))
	}
	for _, s := range scripts {
		if strings.TrimSpace(s[2]) != "" || !strings.Contains(s[1], `src="./app.js"`) {
			t.Errorf("a script element with inline code or another source: %q", s[0])
		}
	}
	if m := regexp.MustCompile(`(?i)\son[a-z]+\s*=|javascript:|<style\b|\sstyle\s*=`).FindString(html); m != "" {
		t.Errorf("index.html has inline script or style the CSP would block: %q", m)
	}
	for _, id := range []string{`id="message"`, `id="send"`, `id="log"`} {
		if !strings.Contains(html, id) {
			t.Errorf("index.html has no element %s", id)
		}
	}
	_, js := get(t, http.MethodGet, "/app.js")
	if m := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function`).FindString(js); m != "" {
		t.Errorf("app.js uses %s: data must go in as text", m)
	}
}
