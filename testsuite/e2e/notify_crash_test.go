package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// The worker is killed -9 between a call's waiting and its notification
// (when the delivery starts, before anything is sent): after a new worker
// starts, exactly one notification arrives — none lost, none twice — and
// the decision's notification after it, once.
func TestKilledBeforeTheNotificationNotifiesOnceAfterRestart(t *testing.T) {
	longSuite(t)
	t.Parallel()
	s := newStack(t)
	hook := newRecorder(t, 200)
	file := writeFile(t, t.TempDir(), "notify.yaml", fmt.Sprintf(`
targets:
  - {name: ops, webhook: "%s/hook", secret: "${HOOK_SECRET}"}
events: [waiting, decided]
`, hook.srv.URL))
	env := []string{"HOOK_SECRET=" + hookSecret}
	first := s.startWorkerProc("worker 1", append(env, "TOOLGATE_FAULT_CRASH_BEFORE_NOTIFY=ops"), "--notify", file)

	const id = "notify-crash"
	s.start(id, closeRun())
	if err := first.wait(t, waitTimeout); !killedBySIGKILL(err) {
		t.Fatalf("worker 1 exit: %v, want killed by SIGKILL as its delivery started", err)
	}
	if n := len(hook.requests("/hook")); n != 0 {
		t.Fatalf("the receiver took %d deliveries before the restart, want 0: the worker died before sending", n)
	}
	s.startWorkerProc("worker 2", env, "--notify", file)
	s.awaitNext(id, waitTimeout, "gate:close_ticket")
	testenv.Eventually(t, 2*workflows.NotifyHeartbeat+notifyTimeout, "the notification after the restart", func() error {
		if got := notices(s.mustTrace(id)); len(got) != 1 {
			return fmt.Errorf("notification records %q", got)
		}
		return nil
	})
	if got := hook.requests("/hook"); len(got) != 1 || got[0].header.Get("X-Toolgate-Event") != workflows.NotifyWaiting {
		t.Fatalf("the receiver took %d deliveries, want exactly one (waiting)", len(got))
	}
	it := s.mustState(id).Interrupts[0]
	if _, err := s.approveByUpdate(id, workflows.DecisionInput{CallID: "c-1", Approver: "bob", ArgsDigest: it.ArgsDigest}); err != nil {
		t.Fatal(err)
	}
	res := s.result(id, waitTimeout)
	got := hook.requests("/hook")
	var events []string
	keys := map[string]bool{}
	for _, q := range got {
		events = append(events, q.header.Get("X-Toolgate-Event"))
		keys[q.header.Get("Idempotency-Key")] = true
	}
	if res.Status != workflows.StatusCompleted || strings.Join(events, ",") != "waiting,decided" || len(keys) != 2 {
		t.Fatalf("result %s; the receiver took %q (%d keys), want completed and waiting, decided once each", res.Status, events, len(keys))
	}
}

// `toolgate demo --notify examples/notify.yaml` shows each webhook delivery
// to the local receiver it starts, its signature checked, with the confirm
// page's link.
func TestDemoNotifiesItsWebhookReceiver(t *testing.T) {
	t.Parallel()
	file, err := filepath.Abs(filepath.Join("..", "..", "examples", "notify.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, 2*time.Minute, "demo", "--yes", "--notify", file, "--data", t.TempDir())
	if code != 0 {
		t.Fatalf("toolgate demo --notify: exit %d\n%s", code, out)
	}
	for _, want := range []string{
		"a webhook receiver at http://127.0.0.1:",
		"webhook ← waiting: close_ticket c-3",
		"(signature verified; delivery ",
		"confirm page: http://127.0.0.1:",
		"webhook ← decided: close_ticket c-3",
		"approved by demo --yes",
		"the webhook receiver took 2 deliveries, each signed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output has no %q:\n%s", want, out)
		}
	}
}
