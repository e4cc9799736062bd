package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// awaitPending polls `toolgate pending` against addr until it lists call
// callID of run id, of toolName.
func awaitPending(t *testing.T, addr, id, callID, toolName string) {
	t.Helper()
	testenv.Eventually(t, waitTimeout, fmt.Sprintf("%s %s in toolgate pending", id, callID), func() error {
		out, code := runCLI(t, waitTimeout, "pending", "--address", addr)
		if code != 0 || !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(id)+`\s+`+callID+`\s+`+toolName+`\b`).MatchString(out) {
			return fmt.Errorf("pending (exit %d):\n%s", code, out)
		}
		return nil
	})
}

// `toolgate mcp serve` without --search-attributes, on a namespace that has
// toolgate's search attributes (as `toolgate dev` registers them), keeps
// them current: a call its client makes that waits at the gate is in
// `toolgate pending`, which looks waiting runs up by ToolgateStatus.
func TestMCPServeKeepsTheNamespacesSearchAttributesByDefault(t *testing.T) {
	t.Parallel()
	ms := newMCPStack(t, "alice")
	cs := mcpConnect(t, ms.m.url, ms.tok, "sa")
	id := mcpRunID("alice", "sa")
	done := callAsync(t, cs, "close_ticket", `{"ticket_id":"TKT-3"}`, "")
	it := ms.awaitWaiting(id, "c-1")
	if it.Tool != "close_ticket" {
		t.Fatalf("%s waits on %+v", id, it)
	}
	awaitPending(t, ms.address(), id, "c-1", "close_ticket")
	awaitVisible(t, ms.stack, fmt.Sprintf("WorkflowId = '%s' AND %s = '%s' AND %s = 'close_ticket'", id,
		workflows.SearchAttrStatus, workflows.StatusWaitingForApproval, workflows.SearchAttrPendingTools), 1)
	ms.decide(id, "c-1", "")
	if res := <-done; res == nil || res.IsError || !strings.Contains(resultText(res), `"closed"`) {
		t.Fatalf("close_ticket after approval: %+v", res)
	}
	if out := ms.m.p.out.String(); strings.Contains(out, "search attributes") {
		t.Errorf("mcp serve said of search attributes, on a namespace that has them:\n%s", out)
	}
}

// On a namespace without toolgate's search attributes, `toolgate worker
// --search-attributes` refuses to start, naming the command that adds them;
// without the flag it starts, says in one line that listing is slower, and
// its waiting runs are still in `toolgate pending` (found by querying every
// running run).
func TestWorkerOnANamespaceWithoutSearchAttributes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{DataDir: dir}) // no SearchAttributes
	if err != nil {
		t.Fatalf("starting the embedded server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.Address(), Namespace: srv.Namespace()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addr := srv.Address()
	base := []string{"worker", "--address", addr, "--namespace", devserver.DefaultNamespace, "--data", dir}

	out, code := runCLI(t, waitTimeout, append(base, "--search-attributes")...)
	if code != 1 || !strings.Contains(out, "--search-attributes: namespace default has no ToolgateStatus/ToolgatePendingTools/ToolgateForkedFrom search attributes") ||
		!strings.Contains(out, "temporal operator search-attribute create --namespace default --name ToolgateStatus --type Keyword") {
		t.Fatalf("toolgate worker --search-attributes: exit %d, want 1 and the missing attributes named:\n%s", code, out)
	}

	p := startProc(t, "toolgate worker", nil, base...)
	testenv.Eventually(t, startTimeout, "toolgate worker ready", func() error {
		if p.exited() {
			t.Fatalf("toolgate worker exited: %v\n%s", p.waitErr, p.out.String())
		}
		if !strings.Contains(p.out.String(), "worker ready on ") {
			return errNotYet
		}
		return nil
	})
	said := regexp.MustCompile(`(?m)^toolgate: namespace default has no ToolgateStatus/ToolgatePendingTools/ToolgateForkedFrom search attributes: ` +
		`.*toolgate pending and the inbox list its waiting runs by querying every running run of the task queue, slower ` +
		`\(add them: temporal operator search-attribute create .*\)$`)
	if !said.MatchString(p.out.String()) {
		t.Errorf("toolgate worker did not say, in one line, that the namespace has no search attributes:\n%s", p.out.String())
	}

	const id = "no-search-attributes"
	if out, code := runCLI(t, waitTimeout, "run", "--id", id, "--goal", "find the login ticket and close it", "--address", addr); code != 0 {
		t.Fatalf("toolgate run: exit %d:\n%s", code, out)
	}
	awaitPending(t, addr, id, "c-3", "close_ticket")
	st, err := tgclient.New(c).State(ctx, id)
	if err != nil || len(st.Interrupts) != 1 {
		t.Fatalf("state of %s: %v %+v", id, err, st)
	}
}
