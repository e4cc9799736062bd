package workflows

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMemoEvictsLeastRecentlyUsedWithinBounds(t *testing.T) {
	m := newMemo(2, 1<<20, nil)
	m.put("a", "t", json.RawMessage(`1`))
	m.put("b", "t", json.RawMessage(`2`))
	_, ok := m.get("a") // a is now the most recently used
	require.True(t, ok)
	m.put("c", "t", json.RawMessage(`3`))
	_, ok = m.get("b")
	require.False(t, ok, "b was least recently used and evicted")
	require.Equal(t, []string{"a", "c"}, keys(m.snapshot()))
	require.Equal(t, MemoStats{Entries: 2, Bytes: 4, Hits: 1, Misses: 1}, m.stats())
}

func TestMemoByteBound(t *testing.T) {
	m := newMemo(100, 10, nil)
	m.put("k1", "t", json.RawMessage(`"abcd"`)) // 2+6 = 8 bytes
	m.put("k2", "t", json.RawMessage(`1`))      // 3 bytes: evicts k1 to fit
	require.Equal(t, []string{"k2"}, keys(m.snapshot()))
	m.put("big", "t", json.RawMessage(`"this is larger than the budget"`))
	require.Equal(t, []string{"k2"}, keys(m.snapshot()), "a result over the whole budget is not memoized")
	require.LessOrEqual(t, m.stats().Bytes, 10)
}

func TestMemoInvalidateAndCarry(t *testing.T) {
	m := newMemo(10, 1<<20, nil)
	m.put("s1", "search", json.RawMessage(`1`))
	m.put("g1", "get", json.RawMessage(`2`))
	m.put("o1", "other", json.RawMessage(`3`))
	m.invalidate([]string{"search", "get"})
	require.Equal(t, []string{"o1"}, keys(m.snapshot()))

	m.put("s2", "search", json.RawMessage(`4`))
	carried := newMemo(10, 1<<20, m.snapshot())
	require.Equal(t, keys(m.snapshot()), keys(carried.snapshot()), "order survives the carry")
	res, ok := carried.get("s2")
	require.True(t, ok)
	require.JSONEq(t, `4`, string(res))
}

func keys(es []MemoEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Key
	}
	return out
}
