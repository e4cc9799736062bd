// Package aguipage is the example chat page of toolgate's AG-UI door.
//
// This is a placeholder with the page's API: the real page (index.html,
// app.js and style.css, embedded) replaces it.
package aguipage

import (
	"io"
	"net/http"
)

// CSP is the Content-Security-Policy of the page's responses.
const CSP = "default-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

const index = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>toolgate AG-UI</title></head>
<body><h1>toolgate AG-UI</h1><p>The endpoint is at <code>./agui</code> (POST a RunAgentInput).</p></body></html>
`

// Handler serves the page at /.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, index)
	})
}
