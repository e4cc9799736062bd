//go:build toolgate_fault

package main

import (
	"os"
	"syscall"
)

// This file is fault injection for the end-to-end suite, compiled only with
// -tags toolgate_fault (testsuite/testenv.BuildToolgate builds so). The
// shipped binary and the image are built without the tag and take
// nofault.go's faultAfterCommit instead, which ignores the variable below.

// crashAfterCommitEnv names a fault-injection switch: the worker kills itself
// (SIGKILL, no cleanup) right after the named tool has committed its side
// effect and before the activity reports back — the worst moment for
// exactly-once.
const crashAfterCommitEnv = "TOOLGATE_FAULT_CRASH_AFTER_COMMIT"

// faultAfterCommit returns the demo desk's after-commit hook that
// $TOOLGATE_FAULT_CRASH_AFTER_COMMIT asks for, or nil when it is unset.
func faultAfterCommit() func(string) error {
	if tool := os.Getenv(crashAfterCommitEnv); tool != "" {
		return crashAfterCommit(tool)
	}
	return nil
}

// crashAfterMCPEnv names the MCP fault-injection switch: the worker kills
// itself (SIGKILL) right after the named MCP tool (SERVER__TOOL) answered a
// destructive call and its result was kept in the MCP journal, before the
// activity reports back.
const crashAfterMCPEnv = "TOOLGATE_FAULT_CRASH_AFTER_MCP"

// faultAfterMCP returns the mcpsource AfterCall hook that
// $TOOLGATE_FAULT_CRASH_AFTER_MCP asks for, or nil when it is unset.
func faultAfterMCP() func(name, idempotencyKey string) {
	toolName := os.Getenv(crashAfterMCPEnv)
	if toolName == "" {
		return nil
	}
	return func(name, _ string) {
		if name == toolName {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}

func crashAfterCommit(toolName string) func(string) error {
	return func(name string) error {
		if name == toolName {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
		return nil
	}
}

// crashBeforeNotifyEnv names the notify fault-injection switch: the worker
// kills itself (SIGKILL) when a delivery to the named target starts, before
// anything is sent — between a call's waiting and its notification.
const crashBeforeNotifyEnv = "TOOLGATE_FAULT_CRASH_BEFORE_NOTIFY"

// faultBeforeNotify returns the hook $TOOLGATE_FAULT_CRASH_BEFORE_NOTIFY asks
// for, or nil when it is unset.
func faultBeforeNotify() func(target string) {
	name := os.Getenv(crashBeforeNotifyEnv)
	if name == "" {
		return nil
	}
	return func(target string) {
		if target == name {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}
