package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/toolgate/toolgate/notify"
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
