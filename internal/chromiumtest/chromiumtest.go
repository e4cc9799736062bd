// Package chromiumtest starts the headless Chromium that toolgate's browser
// tests drive (imported by tests only): Debian's package, never a
// downloaded browser.
package chromiumtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Path is where Debian's chromium package puts the browser.
const Path = "/usr/bin/chromium"

// Browser starts headless Chromium on a fresh profile, for at most timeout,
// stopped when t ends; opts add allocator options (a window size). Without
// the browser the test skips, saying what needs it (what), unless
// TOOLGATE_REQUIRE_CHROMIUM=1 (CI), where it fails.
func Browser(t testing.TB, what string, timeout time.Duration, opts ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	if _, err := os.Stat(Path); err != nil {
		if os.Getenv("TOOLGATE_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("TOOLGATE_REQUIRE_CHROMIUM=1 and no %s: %v", Path, err)
		}
		t.Skipf("no %s: %s needs Debian's chromium (apt-get install chromium); set TOOLGATE_REQUIRE_CHROMIUM=1 to fail instead", Path, what)
	}
	all := append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()),
	}, opts...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), all...)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}
