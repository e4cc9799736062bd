package mcpserve

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/client"
)

func TestToolsListSaysWhatToolgateDoes(t *testing.T) {
	h := newHarness(t, nil)
	cs := h.connect(t, h.alice, nil, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		got[tl.Name] = tl
	}
	if len(got) != len(testTools) {
		t.Fatalf("listed %d tools, want %d", len(got), len(testTools))
	}
	search, closeT, note := got["search"], got["close"], got["note"]
	if a := search.Annotations; a == nil || a.DestructiveHint == nil || *a.DestructiveHint || !a.ReadOnlyHint || !a.IdempotentHint || a.OpenWorldHint != nil {
		t.Errorf("search's annotations %+v: want destructive false, read-only, idempotent, no open-world hint", search.Annotations)
	}
	if a := closeT.Annotations; a == nil || a.DestructiveHint == nil || !*a.DestructiveHint || a.ReadOnlyHint || a.IdempotentHint {
		t.Errorf("close's annotations %+v: want destructive, not read-only, not idempotent", closeT.Annotations)
	}
	if !strings.HasSuffix(closeT.Description, DestructiveSuffix) || strings.Contains(search.Description, "toolgate:") {
		t.Errorf("descriptions %q / %q: only the destructive tool says it waits for approval", closeT.Description, search.Description)
	}
	if a := note.Annotations; a.ReadOnlyHint || !a.IdempotentHint {
		t.Errorf("note (invalidates search) annotations %+v: want not read-only, idempotent", a)
	}
	schema, _ := json.Marshal(closeT.InputSchema)
	if !strings.Contains(string(schema), `"type":"object"`) || !strings.Contains(string(schema), `"id"`) {
		t.Errorf("close's schema %s: want its properties, with type object added", schema)
	}
	if s, _ := json.Marshal(note.InputSchema); string(s) != `{"type":"object"}` {
		t.Errorf("note's schema %s, want {\"type\":\"object\"}", s)
	}
}

func TestCallAnswersTheResultWithMeta(t *testing.T) {
	h := newHarness(t, nil)
	cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r1"}, nil)
	args := map[string]any{"query": "login"}
	res := call(t, cs, "search", args, nil)
	if res.IsError || !strings.Contains(resultText(res), "TKT-3") {
		t.Fatalf("search: error %v, text %q", res.IsError, resultText(res))
	}
	if res.Meta[MetaStatus] != "ok" || res.Meta[MetaCallID] != "c-1" || res.Meta[MetaRun] != "mcp-alice-r1" {
		t.Errorf("meta %v: want status ok, call c-1, run mcp-alice-r1", res.Meta)
	}
	if sc, ok := res.StructuredContent.(map[string]any); !ok || sc["tickets"] == nil {
		t.Errorf("structured content %v: want the result object", res.StructuredContent)
	}
	res = call(t, cs, "search", args, nil)
	if res.Meta[MetaStatus] != "cache_hit" {
		t.Errorf("the same read again: status %v, want cache_hit", res.Meta[MetaStatus])
	}
	ids, _ := h.runs.proposed()
	if ids[0] != "mcp-alice-r1" {
		t.Errorf("proposed to %s, want mcp-alice-r1", ids[0])
	}
	if in := h.runs.starts[0]; in == nil || in.Planner.Kind != "external" || in.Goal != "MCP session alice/r1" || in.RequestToken != "" {
		t.Errorf("start input %+v: want an external planner, the session's goal, unsigned", in)
	}
}

func TestWaitingCallAnswersOnceApproved(t *testing.T) {
	h := newHarness(t, nil)
	cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r1"}, nil)
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- call(t, cs, "close", map[string]any{"id": "TKT-3"}, nil) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	callID, err := h.runs.waitingCall(ctx, "mcp-alice-r1")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		t.Fatalf("answered before approval: %q", resultText(res))
	case <-time.After(300 * time.Millisecond):
	}
	if err := h.runs.decide("mcp-alice-r1", callID, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.IsError || res.Meta[MetaStatus] != "ok" || !strings.Contains(resultText(res), "closed") {
			t.Errorf("approved close: error %v, meta %v, text %q", res.IsError, res.Meta, resultText(res))
		}
	case <-ctx.Done():
		t.Fatal("no answer after approval")
	}
}

func TestRejectedCallIsAnErrorResult(t *testing.T) {
	h := newHarness(t, nil)
	cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r1"}, nil)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if id, err := h.runs.waitingCall(ctx, "mcp-alice-r1"); err == nil {
			_ = h.runs.decide("mcp-alice-r1", id, "wrong ticket")
		}
	}()
	res := call(t, cs, "close", map[string]any{"id": "TKT-3"}, nil)
	if !res.IsError || resultText(res) != "rejected by alice: wrong ticket" || res.Meta[MetaStatus] != "rejected" {
		t.Errorf("rejected: error %v, text %q, meta %v", res.IsError, resultText(res), res.Meta)
	}
}

func TestShortWaitAnswersWaitingAndCallingAgainAttaches(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Wait = 300 * time.Millisecond })
	cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r1"}, nil)
	meta := mcp.Meta{MetaIdempotencyKey: "close-3"}
	res := call(t, cs, "close", map[string]any{"id": "TKT-3"}, meta)
	sc, _ := res.StructuredContent.(map[string]any)
	if !res.IsError || sc["status"] != StatusWaiting || sc["call_id"] != "c-1" || sc["args_digest"] == "" || sc["run"] != "mcp-alice-r1" {
		t.Fatalf("waiting: error %v, structured %v", res.IsError, res.StructuredContent)
	}
	if txt := resultText(res); !strings.Contains(txt, "toolgate approve mcp-alice-r1 c-1") || !strings.Contains(txt, "not run yet") {
		t.Errorf("waiting text %q: want how to approve", txt)
	}
	res = call(t, cs, "close", map[string]any{"id": "TKT-3"}, meta)
	if sc, _ := res.StructuredContent.(map[string]any); sc["call_id"] != "c-1" {
		t.Errorf("calling again: %v, want the same call c-1", res.StructuredContent)
	}
	_, props := h.runs.proposed()
	if len(props) != 2 || props[1].Key != "close-3" || string(props[0].Args) != string(props[1].Args) {
		t.Errorf("proposals %+v: want the same key and arguments twice", props)
	}
	if err := h.runs.decide("mcp-alice-r1", "c-1", ""); err != nil {
		t.Fatal(err)
	}
	if res = call(t, cs, "close", map[string]any{"id": "TKT-3"}, meta); res.IsError || res.Meta[MetaCallID] != "c-1" {
		t.Errorf("after approval: error %v, meta %v, text %q", res.IsError, res.Meta, resultText(res))
	}
}

func TestCallIDReachesAFinishedCall(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Wait = 300 * time.Millisecond })
	cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r1"}, nil)
	args := map[string]any{"id": "TKT-3"}
	res := call(t, cs, "close", args, nil)
	if !strings.Contains(resultText(res), `"toolgate/call_id": "c-1"`) {
		t.Errorf("waiting text %q: want how to reach the call", resultText(res))
	}
	if err := h.runs.decide("mcp-alice-r1", "c-1", ""); err != nil {
		t.Fatal(err)
	}
	res = call(t, cs, "close", args, mcp.Meta{MetaCallID: "c-1"})
	if res.IsError || res.Meta[MetaCallID] != "c-1" || res.Meta[MetaStatus] != "ok" {
		t.Errorf("finished call by id: error %v, meta %v, text %q", res.IsError, res.Meta, resultText(res))
	}
	if _, props := h.runs.proposed(); len(props) != 1 {
		t.Errorf("%d proposals, want 1: reading a call by id proposes nothing", len(props))
	}
	res = call(t, cs, "close", map[string]any{"id": "TKT-4"}, mcp.Meta{MetaCallID: "c-1"})
	if !res.IsError || !strings.Contains(resultText(res), "not this call") {
		t.Errorf("call id with other arguments: error %v, text %q", res.IsError, resultText(res))
	}
}

func TestProgressWhileWaiting(t *testing.T) {
	var mu sync.Mutex
	var msgs []string
	got := make(chan struct{}, 10)
	h := newHarness(t, func(o *Options) { o.Progress = 30 * time.Millisecond })
	cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			msgs = append(msgs, r.Params.Message)
			mu.Unlock()
			select {
			case got <- struct{}{}:
			default:
			}
		}})
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "close", Arguments: map[string]any{"id": "TKT-3"}}
		p.SetProgressToken("tok-1")
		res, err := cs.CallTool(context.Background(), p)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	for range 2 {
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("no progress notification")
		}
	}
	_ = h.runs.decide("mcp-alice-r1", "c-1", "")
	<-done
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(msgs[len(msgs)-1], "waits for approval: toolgate approve mcp-alice-r1 c-1") {
		t.Errorf("progress messages %q: want how to approve", msgs)
	}
}

func TestNoProgressWithoutAToken(t *testing.T) {
	n := 0
	var mu sync.Mutex
	h := newHarness(t, func(o *Options) { o.Progress = 20 * time.Millisecond; o.Wait = 300 * time.Millisecond })
	cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { mu.Lock(); n++; mu.Unlock() }})
	call(t, cs, "close", map[string]any{"id": "TKT-3"}, nil)
	mu.Lock()
	defer mu.Unlock()
	if n != 0 {
		t.Errorf("%d progress notifications without a progress token", n)
	}
}

func TestBusyIsProposedAgain(t *testing.T) {
	h := newHarness(t, nil)
	h.runs.busy = 2
	cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r1"}, nil)
	res := call(t, cs, "search", map[string]any{"query": "x"}, nil)
	if res.IsError || res.Meta[MetaStatus] != "ok" {
		t.Errorf("after busy: error %v, text %q", res.IsError, resultText(res))
	}
	if _, props := h.runs.proposed(); len(props) != 3 {
		t.Errorf("%d proposals, want 3 (busy twice, then taken)", len(props))
	}
}

func TestRefusalsAreErrorResults(t *testing.T) {
	h := newHarness(t, nil)
	cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r1"}, nil)
	res := call(t, cs, "nosuch", map[string]any{}, nil)
	if !res.IsError || !strings.Contains(resultText(res), `unknown tool "nosuch"`) {
		t.Errorf("unknown tool: error %v, text %q: want the run's answer", res.IsError, resultText(res))
	}
	h.runs.err = &client.Error{Kind: client.ErrRefusedInput, Msg: "proposal refused: run mcp-alice-r1 has ended (completed)"}
	res = call(t, cs, "search", map[string]any{"query": "x"}, nil)
	if !res.IsError || !strings.Contains(resultText(res), "has ended") {
		t.Errorf("refused: error %v, text %q", res.IsError, resultText(res))
	}
	res = call(t, cs, "search", map[string]any{"query": "x"}, mcp.Meta{MetaIdempotencyKey: strings.Repeat("k", 201)})
	if !res.IsError || !strings.Contains(resultText(res), "at most 200") {
		t.Errorf("long key: error %v, text %q", res.IsError, resultText(res))
	}
	h.runs.err = nil
	if res = call(t, cs, "search", map[string]any{"query": "x"}, nil); res.IsError {
		t.Errorf("the session is lost after refusals: %q", resultText(res))
	}
}

func TestRunNameFromSessionMetaOrHeader(t *testing.T) {
	h := newHarness(t, nil)
	cs := h.connect(t, h.alice, nil, nil)
	res := call(t, cs, "search", map[string]any{"query": "a"}, nil)
	if want := "mcp-alice-" + cs.ID(); res.Meta[MetaRun] != want {
		t.Errorf("without a name: run %v, want %s (the session id)", res.Meta[MetaRun], want)
	}
	res = call(t, cs, "search", map[string]any{"query": "a"}, mcp.Meta{MetaRun: "named"})
	if res.Meta[MetaRun] != "mcp-alice-named" {
		t.Errorf("_meta run: %v, want mcp-alice-named", res.Meta[MetaRun])
	}
	res = call(t, cs, "search", map[string]any{"query": "a"}, mcp.Meta{MetaRun: "../bad name"})
	if !res.IsError || !strings.Contains(resultText(res), "run name") {
		t.Errorf("bad run name: error %v, text %q", res.IsError, resultText(res))
	}
	cs2 := h.connect(t, h.alice, map[string]string{HeaderRun: "hdr"}, nil)
	res = call(t, cs2, "search", map[string]any{"query": "a"}, mcp.Meta{MetaRun: "named"})
	if res.Meta[MetaRun] != "mcp-alice-hdr" {
		t.Errorf("header and _meta: run %v, want the header's mcp-alice-hdr", res.Meta[MetaRun])
	}
}

func TestNewRefusesASchemaThatIsNotAnObject(t *testing.T) {
	tools := append(testTools[:0:0], testTools...)
	tools[0].Schema = json.RawMessage(`{"type":"array"}`)
	if _, err := New(Options{Runs: newFakeRuns(), Tools: tools}); err == nil || !strings.Contains(err.Error(), "search") {
		t.Errorf("an array schema: %v, want a refusal naming the tool", err)
	}
	s, err := New(Options{Runs: newFakeRuns(), Tools: testTools})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Handler(); err == nil || !strings.Contains(err.Error(), "tokens file") {
		t.Errorf("HTTP without tokens: %v, want a refusal", err)
	}
}

func TestClientGoneStopsWaiting(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Wait = 6 * time.Second })
	cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r1"}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "close", Arguments: map[string]any{"id": "TKT-3"}})
		errc <- err
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if _, err := h.runs.waitingCall(wctx, "mcp-alice-r1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // a poll or two
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled call answered")
	}
	time.Sleep(300 * time.Millisecond) // the cancellation reaches the server
	h.runs.mu.Lock()
	before := h.runs.queries
	h.runs.mu.Unlock()
	time.Sleep(2500 * time.Millisecond)
	h.runs.mu.Lock()
	after := h.runs.queries
	h.runs.mu.Unlock()
	if after != before {
		t.Errorf("the run was queried %d times after the client cancelled", after-before)
	}
}

func TestOpenCallsPerSessionAreBounded(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxWaitingPerSession = 1 })
	cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r1"}, nil)
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- call(t, cs, "close", map[string]any{"id": "TKT-3"}, nil) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.runs.waitingCall(ctx, "mcp-alice-r1"); err != nil {
		t.Fatal(err)
	}
	res := call(t, cs, "search", map[string]any{"query": "a"}, nil)
	if !res.IsError || !strings.Contains(resultText(res), "at most 1") {
		t.Errorf("a second open call: error %v, text %q, want a refusal", res.IsError, resultText(res))
	}
	_ = h.runs.decide("mcp-alice-r1", "c-1", "")
	<-done
	if res = call(t, cs, "search", map[string]any{"query": "a"}, nil); res.IsError {
		t.Errorf("after the first answered: %q", resultText(res))
	}
}
