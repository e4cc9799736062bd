package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// Under a worker policy with operators, olga opens a completed run's steps
// in the inbox, forks it at its one call with other arguments and rewinds it
// to before that call, both signed in the browser with her key: the fork
// waits at the gate with her arguments; the preview names the close that
// stays and alice's approval that is dropped; a confirmation bound to a
// digest the run does not have is refused as stale and changes nothing; the
// confirmation bound to the preview's digest rewinds the run, whose call
// waits at the gate again, undecided, listed in the inbox.
func TestInboxRewindsAndForksInChromium(t *testing.T) {
	ctx := browser(t)
	s := newStack(t)
	alicePub, alicePriv, err := signed.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	olgaPub, olgaPriv, err := signed.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	srv := policyInbox(t, s, fmt.Sprintf("approvers:\n  alice: {key: %q, roles: [support]}\n  olga: {key: %q, roles: [sre]}\n"+
		"operators: [sre]\ntools:\n  close_ticket: {approvers: {roles: [support]}}\n", signed.FormatPublicKey(alicePub), signed.FormatPublicKey(olgaPub)))

	const id, forkID = "inbox-rewind", "inbox-rewind-fork"
	s.start(id, workflows.RunInput{Goal: "close the login ticket", Planner: scripted("closed", step(call("close_ticket", `{"ticket_id":"TKT-3"}`)))})
	s.awaitCalls(id, "c-1")
	outs, err := s.tg.Approve(rewindCtx(t), id, tgclient.Decider{Approver: "alice", Key: alicePriv}, "c-1")
	if err == nil && tgclient.Refused(outs) > 0 {
		err = fmt.Errorf("%+v", outs)
	}
	if err != nil {
		t.Fatal(err)
	}
	s.awaitStatus(id, workflows.StatusCompleted, 0, waitTimeout)

	browse(t, ctx, "open the inbox", chromedp.Navigate(srv.URL))
	keyPEM, err := signed.EncodePrivateKey(olgaPriv)
	if err != nil {
		t.Fatal(err)
	}
	pemText, _ := json.Marshal(string(keyPEM))
	eval(t, ctx, "paste olga's key", `document.getElementById('name').value = 'olga'; document.getElementById('pem').value = `+string(pemText))
	browse(t, ctx, "load the key", chromedp.Click(chromedp.CSS("#keybox summary")), chromedp.Click(chromedp.CSS("#loadkey")))
	await(t, ctx, "signing as olga", `document.getElementById('keystate').textContent.includes('Signing as olga')`)

	row := `#stepstable tr[data-call="c-1"]`
	browse(t, ctx, "show the steps", chromedp.SendKeys(chromedp.CSS("#srun"), id), chromedp.Click(chromedp.CSS("#showsteps")))
	await(t, ctx, "c-1 in the steps", `document.querySelector('`+row+`') !== null`)
	if got := read(t, ctx, "c-1's row", chromedp.Evaluate[string](`document.querySelector('`+row+`').textContent`)); !strings.Contains(got, "close_ticket") || !strings.Contains(got, "approved by alice") {
		t.Errorf("c-1's row: %q, want close_ticket approved by alice", got)
	}
	if got := read(t, ctx, "the steps' summary", chromedp.Evaluate[string](`document.getElementById('stepsinfo').textContent`)); !strings.Contains(got, "under a policy") {
		t.Errorf("the steps' summary: %q, want the run under a policy", got)
	}

	// Fork at c-1 with other arguments, signed in the browser: the token's
	// input_digest is the page's digest of the fork's input, which the run checks.
	browse(t, ctx, "fork from c-1", chromedp.Click(chromedp.CSS(row+" .fork-here")))
	eval(t, ctx, "name the fork and edit its arguments", `document.getElementById('forkid').value = '`+forkID+`'; document.getElementById('forkargs').value = '{"ticket_id": "TKT-4"}'`)
	browse(t, ctx, "start the fork", chromedp.Click(chromedp.CSS("#startfork")))
	await(t, ctx, "the page says the fork started", `document.getElementById('fmsg').textContent.includes('forked `+id+` at c-1 as `+forkID+`')`)
	st := s.awaitCalls(forkID, "c-1")
	if got := string(st.Interrupts[0].CallArgs); got != `{"ticket_id":"TKT-4"}` || st.RequestedBy != "" || !slices.Equal(st.ForkedBy, []string{"olga"}) {
		t.Errorf("the fork waits on c-1 with %s, requested by %q, forked by %v; want the edited arguments, the source's requester (none), forked by olga",
			got, st.RequestedBy, st.ForkedBy)
	}

	// Rewind to before c-1: the preview, then a stale confirmation, then the real one.
	want, err := s.tg.RewindPreview(rewindCtx(t), id, "c-1")
	if err != nil {
		t.Fatal(err)
	}
	// The preview reads and replays the run's history within the inbox's
	// 15 s: on a machine that busy the page says it cannot preview, and an
	// operator asks again; the test does so once, and fails with the
	// page's words if the second ask fails too.
	shown := `document.getElementById('pdigest').textContent.includes('` + want.Digest + `')`
	failed := `document.getElementById('pmsg').textContent.startsWith('Cannot preview')`
	for try := 1; ; try++ {
		browse(t, ctx, "rewind to c-1", chromedp.Click(chromedp.CSS(row+" .rewind-here")))
		await(t, ctx, "the preview, or the page saying why not", shown+" || "+failed)
		if read(t, ctx, "the preview's state", chromedp.Evaluate[bool](shown)) {
			break
		}
		msg := read(t, ctx, "the preview's message", chromedp.Evaluate[string](`document.getElementById('pmsg').textContent`))
		if try == 2 {
			t.Fatalf("the preview, asked twice: %s", msg)
		}
		t.Logf("the preview, asked once: %s; asking again", msg)
	}
	preview := read(t, ctx, "the preview's text", chromedp.Evaluate[string](`document.getElementById('preview').textContent`))
	for _, part := range []string{"c-1 close_ticket", "approved by alice", "Proposed again: c-1", "Messages dropped: 0"} {
		if !strings.Contains(preview, part) {
			t.Errorf("the preview says %q, want %q in it", preview, part)
		}
	}
	if kept := read(t, ctx, "side effects that stay", chromedp.Evaluate[string](`document.getElementById('pkept').textContent`)); !strings.Contains(kept, "c-1 close_ticket") {
		t.Errorf("side effects that stay: %q, want the close", kept)
	}
	if dropped := read(t, ctx, "decisions dropped", chromedp.Evaluate[string](`document.getElementById('pdropped').textContent`)); !strings.Contains(dropped, "approved by alice") {
		t.Errorf("decisions dropped: %q, want alice's approval", dropped)
	}

	before, err := s.client.DescribeWorkflowExecution(rewindCtx(t), id, "")
	if err != nil {
		t.Fatal(err)
	}
	eval(t, ctx, "bind the confirmation to another digest", `document.getElementById('preview').dataset.digest = '`+strings.Repeat("0", 64)+`'`)
	browse(t, ctx, "confirm the stale rewind", chromedp.Click(chromedp.CSS("#confirmrewind")))
	await(t, ctx, "refused as stale", `document.getElementById('pmsg').textContent.includes('Refused as stale')`)
	after, err := s.client.DescribeWorkflowExecution(rewindCtx(t), id, "")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := after.GetWorkflowExecutionInfo(), before.GetWorkflowExecutionInfo(); a.GetExecution().GetRunId() != b.GetExecution().GetRunId() || a.GetHistoryLength() != b.GetHistoryLength() {
		t.Fatalf("a stale rewind changed the run: %v -> %v", b.GetExecution(), a.GetExecution())
	}

	eval(t, ctx, "bind it to the preview's digest again", `document.getElementById('preview').dataset.digest = '`+want.Digest+`'`)
	browse(t, ctx, "confirm the rewind", chromedp.Click(chromedp.CSS("#confirmrewind")))
	await(t, ctx, "the page says the run was rewound", `document.getElementById('notices').textContent.includes('rewound `+id+` to just before c-1 by olga')`)
	if st := s.awaitCalls(id, "c-1"); len(st.Interrupts[0].ApprovedBy) != 0 || st.Status != workflows.StatusWaitingForApproval {
		t.Errorf("after the rewind c-1 waits as %+v (run %s), want it waiting for an approval afresh", st.Interrupts[0], st.Status)
	}
	await(t, ctx, "c-1 listed again", `document.querySelector('`+card(id)+`[data-call="c-1"]') !== null`)
	// The run takes the rewound note once its policy is loaded (the reset
	// re-ran its first task with the note in it): it names olga.
	testenv.Eventually(t, waitTimeout, "olga's rewind recorded", func() error {
		if got := records(s.mustTrace(id), "c-1", workflows.TraceRewound); len(got) != 1 || got[0].Approver != "olga" {
			return fmt.Errorf("rewound records %+v; refused %+v", got, s.mustState(id).Refused)
		}
		return nil
	})
	after, err = s.client.DescribeWorkflowExecution(rewindCtx(t), id, "")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := after.GetWorkflowExecutionInfo().GetExecution().GetRunId(), before.GetWorkflowExecutionInfo().GetExecution().GetRunId(); a == b {
		t.Errorf("after the rewind the run is still %s, want a new run", a)
	}
	tl, err := s.tg.Steps(rewindCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Steps) == 0 || tl.Steps[0].Calls[0].ID != "c-1" || tl.Steps[0].Calls[0].Approver != "" {
		t.Errorf("the steps after the rewind: %+v, want c-1 undecided", tl.Steps)
	}
}
