package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/inbox"
	"github.com/toolgate/toolgate/testsuite/testenv"
)

// `toolgate demo` prints its approvals inbox's URL, and the demo's close can
// be approved there, as the page does it (the inbox's own JSON API, same
// origin, bound to the digest it listed).
func TestDemoCloseApprovedFromTheInbox(t *testing.T) {
	t.Parallel()
	bin := toolgateBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, done := startDemo(t, ctx, bin)

	at := regexp.MustCompile(`approvals inbox at (http://127\.0\.0\.1:\d+)`)
	var url string
	var list inbox.List
	testenv.Eventually(t, 60*time.Second, "the inbox lists c-3", func() error {
		m := at.FindStringSubmatch(out.String())
		if m == nil {
			return fmt.Errorf("no inbox URL yet; output so far:\n%s", out.String())
		}
		url = m[1]
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/pending", nil)
		if err != nil {
			return err
		}
		req.Header.Set(inbox.Header, "1") // the API answers the inbox page (and clients that say so) only
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			return err
		}
		if len(list.Calls) != 1 || list.Calls[0].CallID != "c-3" {
			return fmt.Errorf("the inbox lists %+v", list.Calls)
		}
		return nil
	})
	c := list.Calls[0]
	body, _ := json.Marshal(map[string]any{"run": c.Run, "decision": "approve", "call_id": c.CallID,
		"args_digest": c.ArgsDigest, "kind": c.Kind, "approver": "erin", "note": "from the browser"})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/api/decide", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(inbox.Header, "1")
	req.Header.Set("Origin", url)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("approving c-3 in the inbox: %s", resp.Status)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the demo: %v; output:\n%s", err, out.String())
		}
	case <-ctx.Done():
		t.Fatalf("the demo did not finish after the approval; output:\n%s", out.String())
	}
	for _, want := range []string{"by erin", "from the browser", `ticket TKT-3 "Cannot log in after password reset" is closed`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output has no %q; output:\n%s", want, out.String())
		}
	}
}
