package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/workflows"
)

// aguiReply is one answer of the endpoint: its status, headers, body, and the
// events of a stream.
type aguiReply struct {
	status int
	header http.Header
	body   string
	events []aguiEvent
}

// aguiPost posts body to url with headers ("Host" sets the Host header;
// Content-Type defaults to application/json) and reads the whole answer.
func aguiPost(t *testing.T, method, url, body string, headers map[string]string) aguiReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, url, err)
	}
	r := aguiReply{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, block := range strings.Split(strings.ReplaceAll(r.body, "\r\n", "\n"), "\n\n") {
			var data []string
			for _, line := range strings.Split(block, "\n") {
				if rest, ok := strings.CutPrefix(line, "data:"); ok {
					data = append(data, strings.TrimPrefix(rest, " "))
				}
			}
			if len(data) == 0 {
				continue
			}
			var e aguiEvent
			if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &e); err != nil {
				t.Fatalf("an event that is not JSON: %q: %v", data, err)
			}
			r.events = append(r.events, e)
		}
	}
	return r
}

// refusedRun reports whether the reply refused the request: an HTTP error
// of one of codes, or a stream that ends in RUN_ERROR saying want.
func (r aguiReply) refusedRun(want string, codes ...int) error {
	for _, c := range codes {
		if r.status == c {
			return nil
		}
	}
	if r.status == http.StatusOK && len(r.events) > 0 {
		last := r.events[len(r.events)-1]
		if last.Type == "RUN_ERROR" && strings.Contains(last.Message, want) {
			for _, e := range r.events {
				if e.Type == "TOOL_CALL_START" || e.Type == "RUN_FINISHED" || e.Type == "STATE_SNAPSHOT" || e.Type == "MESSAGES_SNAPSHOT" {
					return fmt.Errorf("the refusal streamed the run's %s first: %s", e.Type, r.body)
				}
			}
			return nil
		}
	}
	return fmt.Errorf("status %d, body %q: want one of %v or a RUN_ERROR saying %q", r.status, clipText(r.body, 600), codes, want)
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// runAgentInput is a RunAgentInput with one user message ("" for none).
func runAgentInput(thread, message string, extra map[string]any) string {
	in := map[string]any{"threadId": thread, "runId": "r-" + thread, "state": map[string]any{}, "messages": []any{},
		"tools": []any{}, "context": []any{}, "forwardedProps": map[string]any{}}
	if message != "" {
		in["messages"] = []any{map[string]any{"id": "u-1", "role": "user", "content": message}}
	}
	for k, v := range extra {
		in[k] = v
	}
	b, _ := json.Marshal(in)
	return string(b)
}

// noRun fails if the thread has a run: the refused request started none.
func (s *stack) noRun(thread string) {
	s.t.Helper()
	if _, err := s.state(aguiThreadRun(thread)); !errors.Is(err, tgclient.ErrUnknownRun) {
		s.t.Fatalf("a refused request on thread %s left a run (or the query failed): %v", thread, err)
	}
}

// The door's own defences, against `toolgate dev --agui-address` with one
// front-end origin allowed: another origin, a wrong Host, a body over the
// bound, a cross-site form's content type, an unknown field, a key given
// twice, a malformed thread id are refused before anything starts; CORS is
// answered for the allowed origin only; and a thread id that names a run
// the endpoint did not start (agui-x, started with toolgate's client) can
// neither message it, nor resume its waiting call, nor read it.
func TestAGUIHostileRequests(t *testing.T) {
	t.Parallel()
	const front = "http://front.example:3000"
	d := startAGUIDev(t, "--agui-origin", front)
	hostileWalkthrough(t, d.stack, d.url, front)

	// The example page beside the endpoint is behind the same Host check.
	if r := aguiPost(t, "GET", d.base+"/", "", nil); r.status != http.StatusOK || !strings.Contains(r.body, "app.js") {
		t.Errorf("GET /: %d %q", r.status, clipText(r.body, 200))
	}
	if r := aguiPost(t, "GET", d.base+"/", "", map[string]string{"Host": "evil.example:" + strings.Split(d.host, ":")[1]}); r.status != http.StatusForbidden && r.status != http.StatusMisdirectedRequest {
		t.Errorf("GET / with a wrong Host: %d %q, want 403 or 421", r.status, clipText(r.body, 200))
	}
}

// hostileWalkthrough is TestAGUIHostileRequests's on the endpoint at url
// (which allows the browser origin front), whose runs s's server holds.
func hostileWalkthrough(t *testing.T, d *stack, url, front string) {
	host := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/agui")

	cases := []struct {
		name, method, body string
		headers            map[string]string
		want               int
		says               string
	}{
		{"another origin", "POST", runAgentInput("h-origin", "find the login ticket", nil), map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden, ""},
		{"an opaque origin", "POST", runAgentInput("h-null", "find the login ticket", nil), map[string]string{"Origin": "null"}, http.StatusForbidden, ""},
		{"a wrong host", "POST", runAgentInput("h-host", "find the login ticket", nil), map[string]string{"Host": "evil.example:" + strings.Split(host, ":")[1]}, 0, ""},
		{"a rebinding host", "POST", runAgentInput("h-rebind", "find the login ticket", nil), map[string]string{"Host": "127.0.0.1.evil.example"}, 0, ""},
		{"a body over 1 MiB", "POST", runAgentInput("h-big", "find the login ticket", map[string]any{"forwardedProps": map[string]any{"pad": strings.Repeat("a", 1<<20)}}), nil, http.StatusRequestEntityTooLarge, ""},
		{"a form's content type", "POST", runAgentInput("h-form", "find the login ticket", nil), map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType, ""},
		{"an unknown field", "POST", runAgentInput("h-field", "find the login ticket", map[string]any{"toolz": []any{}}), nil, http.StatusBadRequest, "toolz"},
		{"a key twice", "POST", strings.Replace(runAgentInput("h-twice", "find the login ticket", nil), `{`, `{"threadId":"h-other",`, 1), nil, http.StatusBadRequest, "threadId"},
		{"trailing data", "POST", runAgentInput("h-trail", "find the login ticket", nil) + `{}`, nil, http.StatusBadRequest, ""},
		{"a GET", "GET", "", nil, http.StatusMethodNotAllowed, ""},
	}
	for _, c := range cases {
		r := aguiPost(t, c.method, url, c.body, c.headers)
		switch {
		case c.want == 0 && r.status != http.StatusForbidden && r.status != http.StatusMisdirectedRequest:
			t.Errorf("%s: status %d (%q), want 403 or 421", c.name, r.status, clipText(r.body, 300))
		case c.want != 0 && r.status != c.want:
			t.Errorf("%s: status %d (%q), want %d", c.name, r.status, clipText(r.body, 300), c.want)
		case !strings.Contains(r.body, c.says):
			t.Errorf("%s: the refusal %q does not say %q", c.name, clipText(r.body, 300), c.says)
		case r.header.Get("Access-Control-Allow-Origin") != "":
			t.Errorf("%s: a refusal with CORS headers: %v", c.name, r.header)
		}
	}
	for _, thread := range []string{"h-origin", "h-null", "h-host", "h-rebind", "h-big", "h-form", "h-field", "h-twice", "h-other", "h-trail"} {
		d.noRun(thread)
	}
	bad := aguiPost(t, "POST", url, runAgentInput("../agui-x", "find the login ticket", nil), nil)
	if err := bad.refusedRun("thread", http.StatusBadRequest); err != nil {
		t.Errorf("a malformed thread id: %v", err)
	}

	// CORS: a preflight from the allowed origin is answered, one from
	// another origin is not; the allowed origin's POST gets its stream.
	pre := func(origin string) aguiReply {
		return aguiPost(t, "OPTIONS", url, "", map[string]string{"Origin": origin, "Access-Control-Request-Method": "POST",
			"Access-Control-Request-Headers": "content-type"})
	}
	if r := pre(front); r.header.Get("Access-Control-Allow-Origin") != front || r.status >= 300 {
		t.Errorf("the allowed origin's preflight: %d %v", r.status, r.header)
	}
	if r := pre("http://evil.example"); r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("another origin's preflight got CORS headers: %d %v", r.status, r.header)
	}
	r := aguiPost(t, "POST", url, runAgentInput("h-front", "find the login ticket", nil), map[string]string{"Origin": front})
	if r.status != http.StatusOK || r.header.Get("Access-Control-Allow-Origin") != front || len(r.events) == 0 || r.events[len(r.events)-1].Type != "RUN_FINISHED" {
		t.Fatalf("the allowed origin's POST: %d %v %q", r.status, r.header, clipText(r.body, 600))
	}

	// A run the endpoint did not start, under the id a thread "x" would name.
	d.start(aguiThreadRun("x"), workflows.RunInput{Goal: "find the login ticket and close it", Planner: plan.Config{Kind: plan.KindSupport}})
	waiting := d.awaitWaiting(aguiThreadRun("x"), "c-3")
	before := d.mustState(aguiThreadRun("x"))
	for what, body := range map[string]string{
		"a message": runAgentInput("x", "close every ticket", nil),
		"a resume": runAgentInput("x", "", map[string]any{"resume": []any{map[string]any{"interruptId": interruptID(waiting),
			"status": "resolved", "payload": map[string]any{"approved": true}}}}),
		"a reconnect": runAgentInput("x", "", nil),
	} {
		r := aguiPost(t, "POST", url, body, nil)
		if err := r.refusedRun("did not start", http.StatusForbidden); err != nil {
			t.Errorf("%s on thread x: %v", what, err)
		}
		if strings.Contains(r.body, "TKT-3") || strings.Contains(r.body, waiting.ArgsDigest[:16]) {
			t.Errorf("%s on thread x: the refusal shows the run's calls: %s", what, clipText(r.body, 600))
		}
	}
	after := d.mustState(aguiThreadRun("x"))
	if after.Status != workflows.StatusWaitingForApproval || len(after.Interrupts) != 1 || after.Queued != before.Queued || after.Turn != before.Turn {
		t.Fatalf("requests on thread x changed run agui-x:\n before %+v\n after  %+v", before, after)
	}
	for _, rec := range d.mustTrace(aguiThreadRun("x")) {
		if rec.CallID == "c-3" && rec.Status != workflows.TraceBlocked {
			t.Fatalf("c-3 of agui-x was decided through the endpoint: %+v", rec)
		}
	}
}
