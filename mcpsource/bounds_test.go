package mcpsource

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
)

// A server cannot stop the worker with a tool too big to record: a 5 MiB
// description and a schema over tool.MaxSchemaBytes are refused (and listed,
// saying why); the other tools are registered and the worker takes them.
func TestOversizedToolsAreRefusedNotFatal(t *testing.T) {
	ts := serve(t, func(s *mcp.Server) {
		s.AddTool(&mcp.Tool{Name: "huge", Description: strings.Repeat("d", 5<<20), InputSchema: objectSchema}, say("ok"))
		s.AddTool(&mcp.Tool{Name: "wide", InputSchema: map[string]any{"type": "object", "description": strings.Repeat("s", tool.MaxSchemaBytes)}}, say("ok"))
		addTool(s, "normal", nil, say("ok"))
	})
	src := open(t, "servers:\n  big:\n    url: "+ts.url()+"\n    tools:\n      normal: {destructive: false}\n", Options{})
	assert.Equal(t, []string{"big__normal"}, registered(src))
	assert.Contains(t, listing(t, src, "big__huge").Refused, fmt.Sprintf("its description has %d bytes, more than the %d", 5<<20, tool.MaxDescriptionBytes))
	assert.Contains(t, listing(t, src, "big__wide").Refused, "its schema has")
	assert.Contains(t, listing(t, src, "big__wide").Refused, fmt.Sprintf("more than the %d", tool.MaxSchemaBytes))
	assert.Empty(t, find(t, src, "big__normal").Spec.Invalidates, "the refused tools (destructive by default) are not registered")
	require.NoError(t, worker.Options{Tools: src.Tools()}.Validate())
}

// Tools each within their bounds whose specs add up to more than
// MaxSpecBytes: those past it in name order are refused, saying why, and the
// rest fit within MaxSpecBytes — invalidations included, which grow with the
// product of a server's destructive tools and reads.
func TestSpecBudgetRefusesToolsPastItInNameOrder(t *testing.T) {
	wide := func(i int) map[string]any {
		return map[string]any{"type": "object", "description": strings.Repeat("s", 60<<10+i)}
	}
	ts := serve(t, func(s *mcp.Server) {
		for _, i := range rand.Perm(8) { // served in no particular order
			s.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%d", i), InputSchema: wide(i)}, say("ok"))
		}
	})
	src := open(t, "servers:\n  w:\n    url: "+ts.url()+"\n", Options{})
	assert.Equal(t, []string{"w__t0", "w__t1", "w__t2", "w__t3"}, registered(src))
	for i := 4; i < 8; i++ {
		assert.Contains(t, listing(t, src, fmt.Sprintf("w__t%d", i)).Refused, "past 262144 bytes in all (mcpsource.MaxSpecBytes; tools are taken in name order")
	}

	// 300 reads and 300 destructive tools on one server: every destructive
	// tool drops every read, 90,000 names in all unless bounded.
	ts = serve(t, func(s *mcp.Server) {
		for i := range 300 {
			addTool(s, fmt.Sprintf("r%03d", i), &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: ptr(false)}, say("ok"))
			addTool(s, fmt.Sprintf("w%03d", i), nil, say("ok"))
		}
	})
	src = open(t, "servers:\n  m:\n    url: "+ts.url()+"\n    trust_annotations: true\n", Options{})
	var specs []tool.Spec
	for _, tt := range src.Tools() {
		specs = append(specs, tt.Spec)
	}
	raw, err := json.Marshal(specs)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(raw), MaxSpecBytes)
	refused := 0
	for _, l := range src.List() {
		if l.Refused != "" {
			refused++
			assert.Contains(t, l.Refused, "mcpsource.MaxSpecBytes")
			assert.GreaterOrEqual(t, l.Name, "m__w", "reads come first in name order: %s refused", l.Name)
		}
	}
	assert.Positive(t, refused)
	assert.Len(t, src.List(), 600)
	require.NoError(t, worker.Options{Tools: src.Tools()}.Validate())
}

// A destructive call's result of megabytes is a success; the journal keeps
// the marker the run keeps, and answers a retry with it.
func TestJournalKeepsTheBoundedResult(t *testing.T) {
	var calls atomic.Int32
	big := strings.Repeat("x", 3<<20)
	ts := serve(t, func(s *mcp.Server) {
		addTool(s, "dump", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return textResult(big), nil
		})
	})
	j, _ := openJournal(t)
	src := open(t, "servers:\n  d:\n    url: "+ts.url()+"\n    tools:\n      dump: {destructive: true}\n", Options{Journal: j})
	res, err := run(t, src, "d__dump", "wf/r/c-1", `{}`, nil)
	require.NoError(t, err)
	full, _ := json.Marshal(big)
	want := tool.ClipResult(full, tool.MaxResultBytes)
	assert.Equal(t, string(want), string(res.Result))
	kept, ok, err := j.Get(context.Background(), "wf/r/c-1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, string(want), string(kept))
	again, err := run(t, src, "d__dump", "wf/r/c-1", `{}`, nil)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(again.Result))
	assert.Equal(t, int32(1), calls.Load())
}
