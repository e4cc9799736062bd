package ledger

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/policy"
)

// Memory keeps a ledger in process, on its own clock, safely for
// concurrent runs.
func TestMemory(t *testing.T) {
	m, err := NewMemory(testPolicy(t, newKeys(t), budget))
	require.NoError(t, err)
	now := t0
	m.Now = func() time.Time { return now }
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = m.Reserve(ctx, refund(string(rune('a'+i)), 1000))
		}()
	}
	wg.Wait()
	v, err := m.Reserve(ctx, refund("k", 1))
	require.NoError(t, err)
	assert.Equal(t, Denied, v.Decide)
	s, err := m.Settle(ctx, Settlement{Key: "a"})
	require.NoError(t, err)
	assert.Equal(t, Settled{Found: true, Entry: keyID("a")}, s)
	require.NoError(t, m.Pause("refund", "alice", "stop"))
	v, _ = m.Reserve(ctx, refund("k", 1))
	assert.Equal(t, Paused, v.Decide)
	assert.Equal(t, t0, v.Pause.At)
	m.Unpause("refund")
	v, _ = m.Reserve(ctx, refund("k", 1))
	assert.Equal(t, Reserved, v.Decide)
	now = now.Add(time.Hour)
	assert.Equal(t, []ScopeView(nil), m.View().Guards[0].Scopes, "out of the window")

	_, err = NewMemory(&policy.Policy{Guards: []policy.Guard{{ID: "x"}}})
	assert.Error(t, err)
	none, err := NewMemory(nil)
	require.NoError(t, err)
	assert.False(t, none.View().Policy)
}
