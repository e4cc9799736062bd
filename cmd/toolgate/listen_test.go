package main

import (
	"strings"
	"testing"
)

// Every door (the inbox, MCP, AG-UI) refuses a non-loopback address
// without TLS unless told --insecure, and half a TLS configuration, saying
// what to pass.
func TestCheckListen(t *testing.T) {
	door := listenCheck{what: "AG-UI", certFlag: "--listen-tls-cert", plain: "serve plain HTTP to the network"}
	with := func(edit func(*listenCheck)) listenCheck { l := door; edit(&l); return l }
	for _, c := range []struct {
		addr    string
		l       listenCheck
		tls     bool
		refused string
	}{
		{"127.0.0.1:8090", door, false, ""},
		{"[::1]:8090", door, false, ""},
		{"localhost:8090", door, false, ""},
		{"0.0.0.0:8090", door, false, "AG-UI's address 0.0.0.0:8090 is not a loopback address: serve it over TLS (--listen-tls-cert, --listen-tls-key), or pass --insecure to serve plain HTTP to the network"},
		{"192.0.2.7:8090", with(func(l *listenCheck) { l.insecure = true }), false, ""},
		{"192.0.2.7:8090", with(func(l *listenCheck) { l.cert, l.key = "c.pem", "k.pem" }), true, ""},
		{"127.0.0.1:8090", with(func(l *listenCheck) { l.cert = "c.pem" }), false, "AG-UI over TLS needs both a certificate and its key (--listen-tls-cert and --listen-tls-key)"},
		{"8090", door, false, `AG-UI's address "8090": want HOST:PORT`},
	} {
		tls, err := checkListen(c.addr, c.l)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s %+v: refused: %v", c.addr, c.l, err)
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%s %+v: err %v, want %q", c.addr, c.l, err, c.refused)
		case err == nil && tls != c.tls:
			t.Errorf("%s %+v: tls %v, want %v", c.addr, c.l, tls, c.tls)
		}
	}
}
