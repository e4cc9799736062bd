package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/mcpsource"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// hostileServer is an MCP server built with the Go SDK, served over
// streamable HTTP on 127.0.0.1, that tries to wedge the runs of the worker
// that uses it: huge has a 5 MiB description; dump (declared a local read)
// and wipe (declared destructive) answer 3 MiB; fail (a local read) fails
// with a 3 MiB message; hang holds its call until the test lets it go. echo
// is a normal read. It counts the calls of each tool.
type hostileServer struct {
	url                      string
	echoes, dumps, wipes     atomic.Int32
	fails, hangsIn, hangsOut atomic.Int32
	entered                  chan struct{} // a hang call reached the server
	left                     chan struct{} // a hang call ended, answered or cancelled
	release                  chan struct{} // closed: hang calls answer
}

// hostileBytes is the size of what the server answers to wedge a run.
const hostileBytes = 3 << 20

func newHostileServer(t *testing.T) *hostileServer {
	t.Helper()
	hs := &hostileServer{entered: make(chan struct{}, 4), left: make(chan struct{}, 4), release: make(chan struct{})}
	big := strings.Repeat("x", hostileBytes)
	object := json.RawMessage(`{"type":"object"}`)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "huge", Description: strings.Repeat("d", 5<<20), InputSchema: object},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("never registered"), nil
		})
	srv.AddTool(&mcp.Tool{Name: "echo", Description: "Echo the arguments.", InputSchema: object},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			hs.echoes.Add(1)
			return &mcp.CallToolResult{StructuredContent: map[string]any{"echo": req.Params.Arguments}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "dump", Description: "Read everything.", InputSchema: object},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			hs.dumps.Add(1)
			return text(big), nil
		})
	srv.AddTool(&mcp.Tool{Name: "wipe", Description: "Wipe, and say so at length.", InputSchema: object},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			hs.wipes.Add(1)
			return text(big), nil
		})
	srv.AddTool(&mcp.Tool{Name: "fail", Description: "Fail at length.", InputSchema: object},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			hs.fails.Add(1)
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: big}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "hang", Description: "Take forever.", InputSchema: object},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			hs.hangsIn.Add(1)
			defer func() {
				hs.hangsOut.Add(1)
				hs.left <- struct{}{}
			}()
			hs.entered <- struct{}{}
			select {
			case <-hs.release:
				return text("at last"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	h := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() {
		select { // a held call is let go first: closing the server waits for it
		case <-hs.release:
		default:
			close(hs.release)
		}
		h.CloseClientConnections()
		h.Close()
	})
	hs.url = h.URL
	return hs
}

// file writes the --mcp file for the server and returns its path.
func (hs *hostileServer) file(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hostile.yaml")
	body := "servers:\n  big:\n    url: " + hs.url + "\n    tools:\n" +
		"      echo: {destructive: false}\n" +
		"      dump: {destructive: false, local: true}\n" +
		"      fail: {destructive: false, local: true}\n" +
		"      hang: {destructive: false}\n" +
		"      wipe: {destructive: true}\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// marker decodes a result that must be the run's truncation marker of a
// value of more than hostileBytes.
func marker(t *testing.T, what string, result json.RawMessage) tool.Truncated {
	t.Helper()
	var m map[string]tool.Truncated
	if err := json.Unmarshal(result, &m); err != nil || m["truncated"].Bytes <= hostileBytes || len(result) > tool.MaxResultBytes {
		t.Fatalf("%s: result %.300s (%d bytes), want the truncation marker of a value over %d bytes", what, result, len(result), hostileBytes)
	}
	return m["truncated"]
}

// A hostile MCP server cannot wedge the runs of `toolgate worker --mcp`
// through payload size: its tool with a 5 MiB description is refused (and
// `mcp list` says why) while the worker starts and its runs — one that never
// touches MCP, one that calls the server's normal tool — complete; a local
// read answering 3 MiB completes with the marker, the server called once; a
// destructive call answering 3 MiB is ok (done) with the marker, and the
// journal keeps the marker; a local read failing with a 3 MiB message is the
// call's error, cut, and the run completes.
func TestMCPHostileServerCannotWedgeRunsThroughSize(t *testing.T) {
	t.Parallel()
	hs := newHostileServer(t)
	file := hs.file(t)

	list, code := runCLI(t, time.Minute, "mcp", "list", "--mcp", file)
	wantRefused := fmt.Sprintf("refused big__huge: tool big__huge: its description has %d bytes, more than the %d a tool may declare", 5<<20, tool.MaxDescriptionBytes)
	if code != 0 || !strings.Contains(list, wantRefused) || !strings.Contains(list, "big__echo") {
		t.Fatalf("toolgate mcp list: exit %d:\n%.3000s\nwant big__echo listed and %q", code, list, wantRefused)
	}

	s := newStack(t)
	s.startWorkerProc("worker --mcp", nil, "--mcp", file, "--allow-auto-approve")

	runs := map[string]workflows.RunInput{
		"no-mcp": {Goal: "search the desk", Planner: scripted("found", step(call("search_tickets", `{"query":"login"}`)))},
		"echo":   {Goal: "echo", Planner: scripted("echoed", step(call("big__echo", `{"say":"hi"}`)))},
		"dump":   {Goal: "read it all", Planner: scripted("read", step(call("big__dump", `{}`)))},
		"wipe": {Goal: "wipe", Approval: workflows.PolicyAlwaysApprove,
			Planner: scripted("wiped", step(call("big__wipe", `{"all":true}`)))},
		"fail": {Goal: "fail", Planner: scripted("failed", step(call("big__fail", `{}`)))},
	}
	for id, in := range runs {
		s.start("hostile-"+id, in)
	}
	type outcome struct {
		id  string
		res workflows.RunResult
		err error
	}
	outcomes := make(chan outcome, len(runs))
	for id := range runs {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
			defer cancel()
			res, err := s.tg.Result(ctx, "hostile-"+id)
			outcomes <- outcome{id, res, err}
		}()
	}
	results := map[string]workflows.RunResult{}
	for range runs {
		o := <-outcomes
		if o.err != nil || o.res.Status != workflows.StatusCompleted {
			t.Errorf("run %s: %v %+v, want completed", o.id, o.err, o.res)
		}
		results[o.id] = o.res
	}
	if t.Failed() {
		for id, res := range results {
			t.Logf("run %s: %s, trace %v", id, res.Status, events(res.Trace))
		}
		t.Fatalf("the server was called: dump %d, wipe %d, fail %d times", hs.dumps.Load(), hs.wipes.Load(), hs.fails.Load())
	}

	checkEvents(t, "the run that never touches MCP", results["no-mcp"].Trace, event{"c-1", "search_tickets", workflows.TraceOK})
	checkEvents(t, "the echo run", results["echo"].Trace, event{"c-1", "big__echo", workflows.TraceOK})
	if r := results["echo"].Trace[0]; !strings.Contains(string(r.Result), `"say":"hi"`) {
		t.Errorf("big__echo's result %s, want the arguments echoed", r.Result)
	}

	checkEvents(t, "the local 3 MiB read", results["dump"].Trace, event{"c-1", "big__dump", workflows.TraceOK})
	marker(t, "big__dump", results["dump"].Trace[0].Result)
	if n := hs.dumps.Load(); n != 1 {
		t.Errorf("the server's dump was called %d times, want once", n)
	}

	wiped := records(results["wipe"].Trace, "c-1", workflows.TraceOK)
	if len(wiped) != 1 || len(records(results["wipe"].Trace, "c-1", workflows.TraceError)) != 0 {
		t.Fatalf("the destructive 3 MiB call's trace: %v, want it ok (done)", events(results["wipe"].Trace))
	}
	m := marker(t, "big__wipe", wiped[0].Result)
	if n := hs.wipes.Load(); n != 1 {
		t.Errorf("the server's wipe was called %d times, want once", n)
	}
	j, err := mcpsource.OpenJournal(filepath.Join(s.dataDir, "mcp-journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	kept, ok, err := j.Get(ctx, s.key("hostile-wipe", "c-1"))
	if err != nil || !ok || marker(t, "the journal's big__wipe", kept) != m {
		t.Errorf("the journal keeps %.300s (ok %v, err %v), want the run's marker", kept, ok, err)
	}

	checkEvents(t, "the local read failing with 3 MiB", results["fail"].Trace, event{"c-1", "big__fail", workflows.TraceError})
	if e := results["fail"].Trace[0].Error; !strings.Contains(e, "xxxx") || len(e) > workflows.MaxTextBytes {
		t.Errorf("big__fail's error: %.200s… (%d bytes), want the server's text, cut", e, len(e))
	}
	if n := hs.fails.Load(); n != 1 {
		t.Errorf("the server's fail was called %d times, want once", n)
	}
}

// A call that hangs on an MCP server does not hold that server for other
// runs: another run's call to it completes while the first call is still
// held by the server, which then answers it.
func TestMCPHangingCallDoesNotHoldTheServerForOtherRuns(t *testing.T) {
	t.Parallel()
	hs := newHostileServer(t)
	s := newStack(t)
	s.startWorkerProc("worker --mcp", nil, "--mcp", hs.file(t))

	s.start("hang-a", workflows.RunInput{Goal: "wait", Planner: scripted("waited", step(call("big__hang", `{}`)))})
	<-hs.entered // run a's call is held by the server
	s.start("hang-b", workflows.RunInput{Goal: "echo", Planner: scripted("echoed", step(call("big__echo", `{"n":1}`)))})
	type outcome struct {
		res workflows.RunResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
		defer cancel()
		res, err := s.tg.Result(ctx, "hang-b")
		done <- outcome{res, err}
	}()
	var b workflows.RunResult
	select {
	case o := <-done:
		if o.err != nil || o.res.Status != workflows.StatusCompleted {
			t.Fatalf("run b: %v %+v, want completed", o.err, o.res)
		}
		b = o.res
	case <-hs.left:
		t.Fatalf("run a's call ended (its activity timed out) before run b's call to the same server completed: run b's call waited behind it")
	}
	if in, out := hs.hangsIn.Load(), hs.hangsOut.Load(); in != 1 || out != 0 {
		t.Fatalf("when run b completed the server had taken %d hang calls and ended %d, want run a's first call still held", in, out)
	}
	checkEvents(t, "run b", b.Trace, event{"c-1", "big__echo", workflows.TraceOK})

	close(hs.release)
	a := s.result("hang-a", waitTimeout)
	checkEvents(t, "run a", a.Trace, event{"c-1", "big__hang", workflows.TraceOK})
	if string(a.Trace[0].Result) != `"at last"` {
		t.Fatalf("run a's result %s, want the server's late answer", a.Trace[0].Result)
	}
}

// `toolgate mcp list` gives up on a server that accepts connections and
// never answers initialize, at its connect_timeout, naming the server and
// the timeout.
func TestMCPListGivesUpOnAServerThatNeverInitialises(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	mute := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() {
		close(stop)
		mute.Close()
	})
	file := filepath.Join(t.TempDir(), "mute.yaml")
	if err := os.WriteFile(file, []byte("servers:\n  mute:\n    url: "+mute.URL+"\n    connect_timeout: 300ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, 2*time.Minute, "mcp", "list", "--mcp", file)
	want := "MCP server mute: connecting: no answer to initialize within 300ms (its connect_timeout)"
	if code == 0 || !strings.Contains(out, want) {
		t.Fatalf("toolgate mcp list: exit %d:\n%s\nwant a failure saying %q", code, out, want)
	}
}
