package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// Under a worker policy, `toolgate agui --policy --agui-tokens` starts a
// thread's run signed by its caller, over plain HTTP against the real
// server: a request without a token is refused (401) and starts nothing;
// alice's message starts the run with alice as its verified requester; her
// own signed approval of its close is refused by the run as self-approval
// and closes nothing; bob may not send her thread a message; bob's signed
// approval, sent through the door, closes the ticket.
func TestAGUIUnderAPolicyTheRequesterCannotApproveTheirOwnCall(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	dir := t.TempDir()
	alicePub, bobPub := newCLIKey(t, dir, "alice"), newCLIKey(t, dir, "bob")
	pol := writeFile(t, dir, "policy.yaml", fmt.Sprintf(`approvers:
  alice: {key: %q, roles: [support]}
  bob:   {key: %q, roles: [support]}
tools:
  close_ticket: {approvers: {roles: [support]}}
`, alicePub, bobPub))
	s.startWorkerProc("worker", nil, "--policy", pol)
	tokens := filepath.Join(dir, "tokens.json")
	aliceTok := newMCPToken(t, tokens, "alice", "--key", filepath.Join(dir, "alice.key"))
	bobTok := newMCPToken(t, tokens, "bob", "--key", filepath.Join(dir, "bob.key"))
	door := s.startAGUIServe("toolgate agui", "", "--policy", pol, "--agui-tokens", tokens)
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	const thread, goal = "policy-chat", "find the login ticket and close it"
	id := aguiThreadRun(thread)

	if r := aguiPost(t, http.MethodPost, door.url, runAgentInput(thread, goal, nil), nil); r.status != http.StatusUnauthorized {
		t.Fatalf("a start without a token: %d %q, want 401", r.status, r.body)
	}
	s.noRun(thread)

	first := aguiPost(t, http.MethodPost, door.url, runAgentInput(thread, goal, nil), bearer(aliceTok))
	if n := len(first.events); n == 0 || first.events[n-1].Type != "RUN_FINISHED" || first.events[n-1].Outcome == nil || first.events[n-1].Outcome.Type != "interrupt" {
		t.Fatalf("alice's first message: %d %s", first.status, clipText(first.body, 2000))
	}
	st := s.mustState(id)
	if st.RequestedBy != "alice" || len(st.Interrupts) != 1 || st.Interrupts[0].Tool != "close_ticket" {
		t.Fatalf("alice's run: requested by %q, waiting for %+v; want alice, one close", st.RequestedBy, st.Interrupts)
	}
	it := st.Interrupts[0]
	approval := func(who string) string {
		key, err := signed.ReadPrivateKey(filepath.Join(dir, who+".key"))
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		tok, err := signed.Sign(key, signed.Claims{Approver: who, WorkflowID: id, Action: signed.ActionApprove, CallID: it.CallID, ArgsDigest: it.ArgsDigest,
			Kind: string(it.Kind), Asked: it.RequestedAt.UnixNano(), IssuedAt: now.Unix(), Expiry: now.Add(5 * time.Minute).Unix()})
		if err != nil {
			t.Fatal(err)
		}
		return runAgentInput(thread, goal, map[string]any{"resume": []any{map[string]any{"interruptId": interruptID(it), "status": "resolved",
			"payload": map[string]any{"approved": true}, "metadata": map[string]any{"token": tok}}}})
	}

	if err := aguiPost(t, http.MethodPost, door.url, approval("alice"), bearer(aliceTok)).refusedRun("self-approval refused"); err != nil {
		t.Fatalf("alice approving her own run's close: %v", err)
	}
	if got := s.ticket("TKT-3").Status; got != "open" || len(s.mustState(id).Interrupts) != 1 {
		t.Fatalf("after alice's refused approval: TKT-3 %s, state %+v", got, s.mustState(id))
	}

	two := runAgentInput(thread, "", map[string]any{"messages": []any{
		map[string]any{"id": "u-1", "role": "user", "content": goal}, map[string]any{"id": "u-2", "role": "user", "content": "and close TKT-4"}}})
	if err := aguiPost(t, http.MethodPost, door.url, two, bearer(bobTok)).refusedRun("requested by alice"); err != nil {
		t.Fatalf("bob's message to alice's thread: %v", err)
	}

	done := aguiPost(t, http.MethodPost, door.url, approval("bob"), bearer(bobTok))
	if n := len(done.events); n == 0 || done.events[n-1].Type != "RUN_FINISHED" || done.events[n-1].Outcome == nil || done.events[n-1].Outcome.Type != "success" {
		t.Fatalf("bob's approval: %d %s", done.status, clipText(done.body, 2000))
	}
	if got := s.ticket("TKT-3").Status; got != "closed" {
		t.Fatalf("TKT-3 is %s after bob's approval", got)
	}
	if got := records(s.mustTrace(id), it.CallID, workflows.TraceApproved); len(got) != 1 || got[0].Approver != "bob" {
		t.Fatalf("the close's approvals: %+v, want bob's only", got)
	}
}
