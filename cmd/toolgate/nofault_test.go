//go:build !toolgate_fault

package main

import "testing"

// The shipped binary (built without -tags toolgate_fault) has no fault
// injection: the end-to-end suite's crash switch is ignored.
func TestNormalBuildIgnoresFaultInjection(t *testing.T) {
	t.Setenv("TOOLGATE_FAULT_CRASH_AFTER_COMMIT", "refund")
	if faultAfterCommit() != nil {
		t.Fatal("a build without -tags toolgate_fault honours TOOLGATE_FAULT_CRASH_AFTER_COMMIT")
	}
}
