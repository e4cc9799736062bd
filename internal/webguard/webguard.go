// Package webguard holds the checks toolgate's HTTP doors (the MCP server,
// the AG-UI endpoint) make of a browser's request before anything else: the
// Host header against the names the server answers to, so a DNS-rebinding
// page cannot reach a loopback server, and the Origin header against an
// allow-list, compared as browsers send origins.
package webguard

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// LoopbackHosts are the Host values of a server listening at addr
// (HOST:PORT, the port resolved): addr itself and localhost, 127.0.0.1 and
// [::1] with its port.
func LoopbackHosts(addr string) []string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return []string{addr}
	}
	out := []string{addr}
	for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
		if hp := net.JoinHostPort(h, port); hp != addr {
			out = append(out, hp)
		}
	}
	return out
}

// HostAllowed says whether Host header value got is one of allowed: an
// entry with a port matches that host and port, one without matches the
// host on any port. Names compare in lower case, without a final dot.
func HostAllowed(allowed []string, got string) bool {
	gh, gp := SplitHost(got)
	if gh == "" {
		return false
	}
	for _, a := range allowed {
		if ah, ap := SplitHost(a); ah == gh && (ap == "" || ap == gp) {
			return true
		}
	}
	return false
}

// PageHeaders sets the headers every response of a door's pages carries:
// the page's Content-Security-Policy, no MIME sniffing, no framing, no
// Referer (a link's token may be in the URL), and no caching.
func PageHeaders(h http.Header, csp string) {
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

// IPOrNamed says whether Host value got is an IP literal, localhost, or a
// host of names (any port): the rule of the doors a browser may reach by
// the listener's address (the inbox, the links' confirm page), which
// refuse any other name, as a DNS-rebinding page would send.
func IPOrNamed(names []string, got string) bool {
	h, _ := SplitHost(got)
	if h == "" {
		return false
	}
	if net.ParseIP(h) != nil || h == "localhost" {
		return true
	}
	for _, n := range names {
		if nh, _ := SplitHost(n); nh == h {
			return true
		}
	}
	return false
}

// SplitHost is a Host value's host (lower case, without brackets or a final
// dot) and port ("" if none).
func SplitHost(hostport string) (host, port string) {
	hostport = strings.ToLower(hostport)
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return strings.TrimSuffix(h, "."), p
	}
	return strings.TrimSuffix(strings.Trim(hostport, "[]"), "."), ""
}

// HostOf is a Host value's host.
func HostOf(hostport string) string { h, _ := SplitHost(hostport); return h }

// NormalOrigin is an origin as browsers send it: scheme://host[:port], lower
// case, without the scheme's default port. Anything else — a path, a query,
// credentials, another scheme — is refused, saying what an origin is.
func NormalOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("origin %.100q: want http(s)://HOST[:PORT], as a browser sends it, without a path", o)
	}
	return withoutDefaultPort(strings.ToLower(u.Scheme), strings.ToLower(u.Host)), nil
}

// OwnOrigin is the origin of a page served by the server r reached.
func OwnOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return withoutDefaultPort(scheme, strings.ToLower(r.Host))
}

func withoutDefaultPort(scheme, host string) string {
	if h, p, err := net.SplitHostPort(host); err == nil && (scheme == "http" && p == "80" || scheme == "https" && p == "443") {
		host = h
		if strings.Contains(h, ":") {
			host = "[" + h + "]"
		}
	}
	return scheme + "://" + host
}
