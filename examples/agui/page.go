// Package aguipage is toolgate's AG-UI example page: a chat with the demo
// desk (index.html, app.js, style.css; no build step, nothing from
// elsewhere), embedded in the binary. `toolgate dev --agui-address` serves it
// at "/" next to the AG-UI endpoint it talks to, "/agui" (package agui).
//
// The page is served under a Content-Security-Policy that allows only its own
// script and stylesheet: no inline script, no other origin, no framing.
package aguipage

import (
	"embed"
	"net/http"

	"github.com/toolgate/toolgate/internal/webguard"
)

//go:embed index.html app.js style.css
var files embed.FS

// CSP is the Content-Security-Policy of every response of Handler.
const CSP = "default-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

// pages are the paths Handler serves: the file and its content type.
var pages = map[string]struct{ file, contentType string }{
	"/":          {"index.html", "text/html; charset=utf-8"},
	"/app.js":    {"app.js", "text/javascript; charset=utf-8"},
	"/style.css": {"style.css", "text/css; charset=utf-8"},
}

// Handler serves the page: "/" (index.html), "/app.js" and "/style.css" to
// GET and HEAD, with the security headers; any other path is 404, another
// method 405.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		webguard.PageHeaders(h, CSP)
		p, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "the example page answers GET and HEAD only", http.StatusMethodNotAllowed)
			return
		}
		b, err := files.ReadFile(p.file)
		if err != nil { // cannot happen: the files are embedded
			http.Error(w, "reading "+p.file+": "+err.Error(), http.StatusInternalServerError)
			return
		}
		h.Set("Content-Type", p.contentType)
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(b)
	})
}
