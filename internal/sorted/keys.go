// Package sorted lists a map's keys in order, for code (workflows, and what
// they call) whose results and messages must not depend on Go's map order.
package sorted

import "slices"

// Keys returns m's keys, sorted.
func Keys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	//workflowcheck:ignore (collects the keys, sorted next)
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
