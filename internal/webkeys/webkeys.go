// Package webkeys holds the one copy of the script that signs toolgate's
// tokens in a browser (sign.js: canonical JSON, tool.Digest, signed.Claims as
// Go writes them, a compact JWS signed with WebCrypto Ed25519, the PKCS#8 PEM
// key toolgate keys new writes), served at Path by the approvals inbox and by
// the confirm page alike. The private key stays in the page.
package webkeys

import (
	_ "embed"
	"net/http"
)

// Path is where the pages load the script from.
const Path = "/sign.js"

// JS is the script's text.
//
//go:embed sign.js
var JS []byte

// Handler serves JS as JavaScript.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		_, _ = w.Write(JS)
	})
}
