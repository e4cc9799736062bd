package readme

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/inbox"
	"github.com/toolgate/toolgate/internal/chromiumtest"
	"github.com/toolgate/toolgate/testsuite/testenv"
)

// background is a block left running.
type background struct {
	b    Block
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

func (p *page) start(b Block) {
	p.ran++
	out := &syncBuffer{}
	cmd := p.shell(context.Background(), b.Code, out)
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("%s: %v", b.Where(), err)
	}
	bg := &background{b: b, cmd: cmd, out: out, done: make(chan error, 1)}
	go func() { bg.done <- cmd.Wait() }()
	p.bg = append(p.bg, bg)
	deadline := time.After(4 * time.Minute)
	for !strings.Contains(out.String(), b.Until) {
		select {
		case err := <-bg.done:
			bg.done <- err
			p.t.Fatalf("%s: the block ended (%v) before its output said %q\n--- block\n%s--- output\n%s", b.Where(), err, b.Until, b.Code, out)
		case <-deadline:
			p.t.Fatalf("%s: after 4 minutes its output does not say %q\n--- output\n%s", b.Where(), b.Until, out)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (p *page) last(b Block) *background {
	if len(p.bg) == 0 {
		p.t.Fatalf("%s: no block runs in the background", b.Where())
	}
	return p.bg[len(p.bg)-1]
}

// wait waits for the last background block to end by itself.
func (p *page) wait(b Block) {
	p.ran++
	bg := p.last(b)
	select {
	case err := <-bg.done:
		bg.done <- err
		if err != nil {
			p.t.Errorf("%s: %s ended with %v\n--- output\n%s", b.Where(), bg.b.Where(), err, bg.out)
		} else if miss := missing(bg.out.String(), b.Expect); miss != "" {
			p.t.Errorf("%s: the output of %s does not say %s\n--- output\n%s", b.Where(), bg.b.Where(), miss, bg.out)
		}
	case <-time.After(3 * time.Minute):
		p.t.Errorf("%s: %s has not ended after 3 minutes\n--- output\n%s", b.Where(), bg.b.Where(), bg.out)
	}
}

var inboxURL = regexp.MustCompile(`approvals inbox at (http://127\.0\.0\.1:\d+)`)

// approve does what the page asks of its reader in the browser: open the
// inbox the last background block printed, type a name, press Approve.
// Without Chromium (and without TOOLGATE_REQUIRE_CHROMIUM=1) it sends what
// the page sends, through the inbox's own API, and says so.
func (p *page) approve(b Block) {
	p.ran++
	bg := p.last(b)
	m := inboxURL.FindStringSubmatch(bg.out.String())
	if m == nil {
		p.t.Fatalf("%s: %s printed no approvals inbox URL\n--- output\n%s", b.Where(), bg.b.Where(), bg.out)
	}
	if _, err := os.Stat(chromiumtest.Path); err != nil && os.Getenv("TOOLGATE_REQUIRE_CHROMIUM") != "1" {
		p.t.Logf("%s: no %s: approving through the inbox's API, as its page does (TOOLGATE_REQUIRE_CHROMIUM=1 requires the browser)", b.Where(), chromiumtest.Path)
		p.approveByAPI(b, m[1])
		return
	}
	ctx := chromiumtest.Browser(p.t, "the README's walk through the inbox", 2*time.Minute, chromedp.WindowSize(1000, 1300))
	poll := func(expr string) chromedp.Action[bool] {
		return chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(90*time.Second))
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(m[1])); err != nil {
		p.t.Fatalf("%s: opening %s: %v", b.Where(), m[1], err)
	}
	// The card of the run the page started (a newcomer who read other pages
	// first may have other runs waiting), or the one card listed.
	cardSel, listed, gone := ".card", `document.querySelectorAll('.card .approve').length === 1`, `document.querySelectorAll('.card').length === 0`
	if p.runID != "" {
		cardSel = fmt.Sprintf(".card[data-run=%q]", p.runID)
		listed = fmt.Sprintf("document.querySelectorAll(%q).length === 1", cardSel+" .approve")
		gone = fmt.Sprintf("document.querySelector(%q) === null", cardSel)
	}
	if _, err := chromedp.Run(ctx, poll(listed)); err != nil {
		says, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('live').textContent + ' | ' + document.getElementById('error').textContent + ' | ' + document.getElementById('calls').textContent.slice(0, 2000)`))
		p.t.Fatalf("%s: the inbox at %s never listed one call to approve (%s): %v; the page says: %s\n--- output\n%s", b.Where(), m[1], cardSel, err, says, bg.out)
	}
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#name"), "alice"), chromedp.Click(chromedp.CSS(cardSel+" .approve"))); err != nil {
		p.t.Fatalf("%s: approving in the inbox: %v", b.Where(), err)
	}
	if _, err := chromedp.Run(ctx, poll(gone)); err != nil {
		msg, _ := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("#calls")))
		p.t.Fatalf("%s: the approved call is still listed (%v); the page says: %s", b.Where(), err, msg)
	}
}

// approveByAPI lists the inbox's one waiting call (of the page's run, if it
// started one by id) and approves it as alice,
// with the headers and the digest the page would send.
func (p *page) approveByAPI(b Block, base string) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var list inbox.List
	query := ""
	if p.runID != "" {
		query = "?run=" + url.QueryEscape(p.runID)
	}
	for len(list.Calls) != 1 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/pending"+query, nil)
		req.Header.Set(inbox.Header, "1")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&list)
			resp.Body.Close()
		}
		if ctx.Err() != nil {
			p.t.Fatalf("%s: the inbox at %s never listed one call (%v): %+v", b.Where(), base, err, list.Calls)
		}
		time.Sleep(300 * time.Millisecond)
	}
	c := list.Calls[0]
	body, _ := json.Marshal(map[string]any{"run": c.Run, "decision": "approve", "call_id": c.CallID,
		"args_digest": c.ArgsDigest, "kind": c.Kind, "approver": "alice"})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/decide", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(inbox.Header, "1")
	req.Header.Set("Origin", base)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s: approving in the inbox: %v", b.Where(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		p.t.Fatalf("%s: approving in the inbox: %s %s", b.Where(), resp.Status, msg)
	}
}

// syncBuffer is what a block writes and the test reads.
type syncBuffer = testenv.Buffer
