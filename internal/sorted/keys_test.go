package sorted

import (
	"slices"
	"testing"
)

func TestKeysAreSorted(t *testing.T) {
	m := map[string]int{"b": 1, "a": 2, "d": 3, "c": 4}
	for range 20 { // map order varies from one range to the next
		if got := Keys(m); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
			t.Fatalf("Keys = %q", got)
		}
	}
}
