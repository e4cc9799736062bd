package workflows

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A run remembers at most MaxExternalKept finished calls and
// ExternalResultBytes of their results, the newest first; calls not yet
// finished are always kept.
func TestExternalCallsAreBounded(t *testing.T) {
	r := &run{}
	result := []byte(`"` + strings.Repeat("x", 4<<10) + `"`)
	r.ext = append(r.ext, &ExternalCall{CallID: "c-0", Tool: "close_ticket"}) // waiting
	for i := 1; i <= MaxExternalKept+50; i++ {
		r.ext = append(r.ext, &ExternalCall{CallID: fmt.Sprintf("c-%d", i), Tool: "search", Done: true, Status: TraceOK, Result: result})
	}
	r.trimExternal()
	require.Len(t, r.ext, MaxExternalKept+1)
	require.Equal(t, "c-0", r.ext[0].CallID, "the unfinished call is kept")
	require.Equal(t, "c-51", r.ext[1].CallID, "the oldest finished calls are forgotten first")
	require.Equal(t, fmt.Sprintf("c-%d", MaxExternalKept+50), r.ext[len(r.ext)-1].CallID)
	bytes, dropped := 0, 0
	for _, e := range r.ext {
		bytes += len(e.Result)
		if e.ResultDropped {
			dropped++
			require.Nil(t, e.Result)
		}
	}
	require.LessOrEqual(t, bytes, ExternalResultBytes)
	require.Positive(t, dropped)
	require.True(t, r.ext[1].ResultDropped, "the oldest results go first")
	require.False(t, r.ext[len(r.ext)-1].ResultDropped)
}
