package e2e

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/testsuite/testenv"
)

// `toolgate dev --notify FILE --inbox-address` as docs/notifications.md runs it: the
// run's webhook carries a link to the inbox's listener, whose confirm page
// shows the call on a GET and approves it on the page's POST, while the
// inbox itself is still served beside it.
func TestDevAnswersNotificationsOnItsInbox(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hook := newRecorder(t, http.StatusOK)
	inbox := freeAddr(t)
	_, priv, err := signed.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := dir + "/link.key"
	if err := signed.WritePrivateKey(keyFile, priv); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, dir, "notify.yaml", fmt.Sprintf(`
targets:
  - {name: ops, webhook: "%s/hook", secret: "${HOOK_SECRET}"}
events: [waiting]
link_base: "http://%s"
link_key_file: "%s"
`, hook.srv.URL, inbox, keyFile))
	dev := startProc(t, "toolgate dev", []string{"HOOK_SECRET=" + hookSecret}, "dev", "--address", "127.0.0.1:0", "--data", dir+"/data",
		"--notify", file, "--inbox-address", inbox)
	ready := regexp.MustCompile(`(?m)^ready (\S+)$`)
	var addr string
	testenv.Eventually(t, startTimeout, "toolgate dev ready", func() error {
		if dev.exited() {
			t.Fatalf("toolgate dev exited: %v\n%s", dev.waitErr, dev.out.String())
		}
		if m := ready.FindStringSubmatch(dev.out.String()); m != nil {
			addr = m[1]
			return nil
		}
		return fmt.Errorf("not ready yet")
	})
	if !strings.Contains(dev.out.String(), "notification links answered at http://"+inbox+"/confirm") {
		t.Errorf("dev does not say where links are answered:\n%s", dev.out.String())
	}
	cli := cliAt(t, addr)
	plan := writeFile(t, dir, "plan.json", `{"goal":"close the login ticket","planner":{"kind":"scripted","turns":[[{"tool":"close_ticket","args":{"ticket_id":"TKT-3"}}]],"answer":"closed"}}`)
	cli(0, "run", "--id", "dev-notify", "--plan", plan)
	var link string
	testenv.Eventually(t, notifyTimeout, "the webhook's delivery", func() error {
		for _, q := range hook.requests("/hook") {
			if m := regexp.MustCompile(`"link":"([^"]+)"`).FindSubmatch(q.body); m != nil {
				link = strings.ReplaceAll(string(m[1]), `\u0026`, "&")
				return nil
			}
		}
		return fmt.Errorf("%d deliveries, none with a link", len(hook.requests("/hook")))
	})
	if status, body := get(t, link); status != http.StatusOK || !strings.Contains(body, "close_ticket") {
		t.Fatalf("GET the link: %d\n%s", status, body)
	}
	if out := cli(0, "next", "dev-notify"); !strings.Contains(out, "gate:close_ticket") {
		t.Fatalf("after the GET, next says %q: want c-1 still waiting", out)
	}
	if status, body := postConfirm(t, "http://"+inbox, tokenOf(t, link), "approve"); status != http.StatusOK || !strings.Contains(body, "approved") {
		t.Fatalf("the page's POST: %d\n%s", status, body)
	}
	testenv.Eventually(t, waitTimeout, "the run completed", func() error {
		if out := cli(0, "status", "dev-notify"); !strings.Contains(out, "completed") {
			return fmt.Errorf("status: %s", out)
		}
		return nil
	})
	if status, body := get(t, "http://"+inbox+"/"); status != http.StatusOK || !strings.Contains(body, "app.js") {
		t.Fatalf("the inbox beside the confirm page: %d\n%s", status, body)
	}
}
