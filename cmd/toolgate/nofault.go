//go:build !toolgate_fault

package main

// faultAfterCommit is the demo desk's after-commit hook: none. Fault
// injection (TOOLGATE_FAULT_CRASH_AFTER_COMMIT) exists only in binaries built
// with -tags toolgate_fault, for the end-to-end suite (fault.go).
func faultAfterCommit() func(string) error { return nil }

// faultAfterMCP is the MCP source's after-call hook: none
// (TOOLGATE_FAULT_CRASH_AFTER_MCP exists only with -tags toolgate_fault).
func faultAfterMCP() func(name, idempotencyKey string) { return nil }

// faultBeforeNotify is the notifier's before-delivery hook: none
// (TOOLGATE_FAULT_CRASH_BEFORE_NOTIFY exists only with -tags toolgate_fault).
func faultBeforeNotify() func(target string) { return nil }
