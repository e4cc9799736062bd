//go:build !toolgate_fault

package main

import "testing"

// The shipped binary ignores the MCP crash switch too.
func TestNormalBuildIgnoresMCPFaultInjection(t *testing.T) {
	t.Setenv("TOOLGATE_FAULT_CRASH_AFTER_MCP", "files__write_file")
	if faultAfterMCP() != nil {
		t.Fatal("a build without -tags toolgate_fault honours TOOLGATE_FAULT_CRASH_AFTER_MCP")
	}
}
