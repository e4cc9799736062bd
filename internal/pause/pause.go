// Package pause waits for a while, or less when a context ends first: the
// polling loops of the doors (agui, mcpserve) wait with it.
package pause

import (
	"context"
	"time"
)

// For waits d, or until ctx is done; it reports whether the whole of d passed.
func For(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
