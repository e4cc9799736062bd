package workflows

import (
	"container/list"
	"encoding/json"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/tool"
)

// MemoEntry is one memoized result (also the form the memo is carried in
// across continue-as-new).
type MemoEntry struct {
	Key    string          `json:"key"`
	Tool   string          `json:"tool"`
	Result json.RawMessage `json:"result"`
}

// memo is the session's memo of non-destructive results: bounded in entries
// and bytes, evicting the least recently used entry first. It is workflow
// state, so it survives worker restarts, and it is carried over on
// continue-as-new. Its order lives in a list, never in map iteration, so
// eviction is deterministic.
type memo struct {
	maxEntries, maxBytes int
	order                *list.List // of *MemoEntry, least recently used first
	index                map[string]*list.Element
	bytes                int
	hits, misses         int64
}

// newMemo builds a memo holding the carried entries (least recently used first).
func newMemo(maxEntries, maxBytes int, carried []MemoEntry) *memo {
	m := &memo{maxEntries: maxEntries, maxBytes: maxBytes, order: list.New(), index: map[string]*list.Element{}}
	for _, e := range carried {
		m.put(e.Key, e.Tool, e.Result)
	}
	return m
}

func entrySize(e *MemoEntry) int { return len(e.Key) + len(e.Result) }

// get returns the result memoized under key, if any, and counts the hit or miss.
func (m *memo) get(key string) (json.RawMessage, bool) {
	el, ok := m.index[key]
	if !ok {
		m.misses++
		return nil, false
	}
	m.hits++
	m.order.MoveToBack(el)
	return el.Value.(*MemoEntry).Result, true
}

// put memoizes a result, evicting least recently used entries to stay within
// bounds. A result larger than the whole byte budget is not memoized.
func (m *memo) put(key, toolName string, result json.RawMessage) {
	e := &MemoEntry{Key: key, Tool: toolName, Result: result}
	m.remove(key)
	if m.maxEntries <= 0 || entrySize(e) > m.maxBytes {
		return
	}
	for m.order.Len() >= m.maxEntries || m.bytes+entrySize(e) > m.maxBytes {
		m.remove(m.order.Front().Value.(*MemoEntry).Key)
	}
	m.index[key] = m.order.PushBack(e)
	m.bytes += entrySize(e)
}

func (m *memo) remove(key string) {
	if el, ok := m.index[key]; ok {
		m.bytes -= entrySize(el.Value.(*MemoEntry))
		m.order.Remove(el)
		delete(m.index, key)
	}
}

// invalidate drops every entry of the named tools.
func (m *memo) invalidate(tools []string) {
	for el := m.order.Front(); el != nil; {
		next := el.Next()
		if e := el.Value.(*MemoEntry); slices.Contains(tools, e.Tool) {
			m.remove(e.Key)
		}
		el = next
	}
}

// snapshot lists the entries, least recently used first.
func (m *memo) snapshot() []MemoEntry {
	out := make([]MemoEntry, 0, m.order.Len())
	for el := m.order.Front(); el != nil; el = el.Next() {
		out = append(out, *el.Value.(*MemoEntry))
	}
	return out
}

func (m *memo) stats() MemoStats {
	return MemoStats{Entries: m.order.Len(), Bytes: m.bytes, Hits: m.hits, Misses: m.misses}
}

// memoStage answers a repeated read from the session's memo. Destructive
// calls skip it both ways: never served from it, never stored in it (the run
// stage stores what a read returns).
func (r *run) memoStage(_ workflow.Context, f *flight) stage {
	if !f.spec.Memoized() {
		return stageRun
	}
	key, _ := tool.Key(f.c.Tool, f.c.Args) // canonical: check passed
	if res, ok := r.memo.get(key); ok {    // the tool does not run: the fleet ledger releases it
		return f.endWith(outcome{Status: TraceCacheHit, Result: res}, TraceRecord{Status: TraceCacheHit, Result: res})
	}
	r.metrics.WithTags(map[string]string{"tool": f.c.Tool}).Counter(MetricPrefix + "cache_miss").Inc(1)
	return stageRun
}
