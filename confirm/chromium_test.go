package confirm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/internal/chromiumtest"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/signed"
)

// browser starts headless Chromium (internal/chromiumtest).
func browser(t *testing.T) context.Context {
	return chromiumtest.Browser(t, "the confirm page's browser test", time.Minute)
}

// The confirm page in real Chromium, under a policy: alice (via email)
// approves by the link alone, and the form the browser posts — its own
// Origin and Sec-Fetch-Site, under Referrer-Policy: no-referrer — passes the
// cross-site checks; bob (no via) chooses his key file, and the page signs
// his rejection with it, a token his public key verifies.
func TestConfirmPageInChromium(t *testing.T) {
	ctx := browser(t)
	x := newFixture(t, true)
	var mu sync.Mutex
	var seen []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			mu.Lock()
			seen = append(seen, r.Header.Clone())
			mu.Unlock()
		}
		x.h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	x.now = time.Now().Truncate(time.Second) // the browser signs with its own clock

	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	banner := func() string {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(".banner"))); err != nil {
			t.Fatalf("no outcome on the page: %v", err)
		}
		s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(".banner")))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	run("alice approves by the link", chromedp.Navigate(srv.URL+"/confirm?t="+url.QueryEscape(x.link("alice", notify.ViaEmail))),
		chromedp.WaitVisible(chromedp.CSS("#decide")), chromedp.SendKeys(chromedp.CSS(`textarea[name=reason]`), "fine by me"),
		chromedp.Click(chromedp.CSS("button.approve")))
	if got := banner(); !strings.Contains(got, "approved c-3 (close_ticket) as alice via email") {
		t.Fatalf("the page says %q", got)
	}
	mu.Lock()
	if o, site := seen[0].Get("Origin"), seen[0].Get("Sec-Fetch-Site"); site != "same-origin" || (o != "null" && o != srv.URL) {
		t.Errorf("the browser's form: Origin %q, Sec-Fetch-Site %q", o, site)
	} else {
		t.Logf("the browser's form: Origin %q, Sec-Fetch-Site %q", o, site)
	}
	mu.Unlock()
	_, acted := x.f.calls()
	if len(acted) != 1 || acted[0].In.Via != "email" || acted[0].In.Token == "" {
		t.Fatalf("decisions %+v", acted)
	}

	key := filepath.Join(t.TempDir(), "bob.key")
	if err := signed.WritePrivateKey(key, x.keys["bob"]); err != nil {
		t.Fatal(err)
	}
	run("bob opens his link", chromedp.Navigate(srv.URL+"/confirm?t="+url.QueryEscape(x.link("bob", notify.ViaEmail))),
		chromedp.WaitVisible(chromedp.CSS("#keyfile")))
	if dir := os.Getenv("TOOLGATE_ARTIFACTS"); dir != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "confirm.png"), png, 0o644)
		}
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
	}
	run("bob signs his rejection in the page", chromedp.SetUploadFiles(chromedp.CSS("#keyfile"), []string{key}),
		chromedp.SendKeys(chromedp.CSS(`textarea[name=reason]`), "wrong <b>ticket</b>"), chromedp.Click(chromedp.CSS("button.reject")))
	if got := banner(); !strings.Contains(got, "rejected c-3 (close_ticket) as bob") {
		t.Fatalf("the page says %q", got)
	}
	_, acted = x.f.calls()
	if len(acted) != 2 {
		t.Fatalf("decisions %+v", acted)
	}
	pub, _ := x.pol.Key("bob")
	c, err := signed.Verify(acted[1].In.Token, pub)
	if err != nil {
		t.Fatalf("the page's token: %v", err)
	}
	want := signed.Claims{Approver: "bob", WorkflowID: "run-1", Action: signed.ActionReject, CallID: "c-3", ArgsDigest: x.it.ArgsDigest,
		Kind: "gate", Asked: x.it.RequestedAt.UnixNano(), Reason: "wrong <b>ticket</b>", ID: c.ID, IssuedAt: c.IssuedAt, Expiry: c.IssuedAt + 600}
	if c != want || len(c.ID) != 32 {
		t.Errorf("the page signed %+v, want %+v with a random jti (16 bytes in hex)", c, want)
	}
	if d := time.Since(time.Unix(c.IssuedAt, 0)); d < -time.Minute || d > time.Minute {
		t.Errorf("iat %d is %s off", c.IssuedAt, d)
	}
}
