package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"
)

// versionChangeID is the workflow.GetVersion change id of AgentRun's rules.
// Each version is a change that would otherwise break the replay of runs
// started before it (testsuite/histories keeps a history of each):
//
//	DefaultVersion  the first release
//	1               a decision for a tool's own interrupt must say kind "interrupt"
//	2               an approval's timeout timer is cancelled once the call is decided
//	3               the trust boundary: carries, args_digest, idempotency keys, MaxArgsBytes
//	4               the worker's policy: rules, signed decisions, quorum, edits, grants
//	5               the trust boundary, second pass
//	6               outcomes said exactly (edited, cancelled, responded)
//	7               rewind and fork
//	8               notifications; a decision by link
//	9               the trust boundary, third pass: spent tokens outside the run
//	10              fleet guards
//	11              the trust boundary, fourth pass: permits on tool activities
//	12              authority lives where only workers can write (spent.go, guards.go)
//	13              a run keeps a link only if a worker recorded it (links.go)
//	14              a run takes a rewind note only with a worker's record of its
//	                reset (rewindact.go)
//	15              a proposal may name a waiter the run signals when the call
//	                ends (callended.go): a Nexus call polls nothing
//	16              the scripted planner's answer says which calls did not run
//	                and why (plan.ScriptedAnswer)
//	17              a guarded call whose tool's question parked is settled with
//	                the fleet ledger when a later run of the chain ends it
//	                unanswered, as in the run that asked (pipeline.go)
//
// Versions before versionOldest are retired (issue #47): their branches are
// gone from the code, and a worker of this build refuses to run such a run
// (retiredRun), saying which build does. docs/versions.md says how to drain
// them first; `toolgate versions` counts the open runs of each version.
const (
	versionChangeID = "decision-kind"
	versionCurrent  = 17
	// versionOldest is the oldest rules version this build runs. At most
	// three versions live in the code: raise it (and delete the branches
	// below it) when a fourth comes.
	versionOldest = 15
	// retiredBuild names a build that still runs every retired version.
	retiredBuild = "toolgate at commit c073de4f16c0 (the last that ran every rules version, from the first release to 16)"
)

// Versions of versionChangeID that live in the code.
const (
	// versionScriptedAnswer: a scripted turn whose calls did not all run
	// is answered with what did not (plan.ScriptedAnswer).
	versionScriptedAnswer workflow.Version = 16
	// versionResumeSettles: a guarded call whose tool's question parked is
	// settled with the fleet ledger when the run that takes it up ends it
	// unanswered (pipeline.go, resume).
	versionResumeSettles workflow.Version = 17
)

// RulesVersions are the rules versions a worker of this build runs: from
// Oldest to Current. A run started under another is refused (RetiredMessage).
type RulesVersions struct {
	Oldest  int `json:"oldest"`
	Current int `json:"current"`
	// ChangeID is the workflow.GetVersion change id that records a run's
	// version; Temporal keeps it in the TemporalChangeVersion search
	// attribute as "<ChangeID>-<version>".
	ChangeID string `json:"change_id"`
	// RetiredBuild names a build that runs every retired version.
	RetiredBuild string `json:"retired_build"`
}

// Versions is what this build runs.
func Versions() RulesVersions {
	return RulesVersions{Oldest: versionOldest, Current: versionCurrent, ChangeID: versionChangeID, RetiredBuild: retiredBuild}
}

// RetiredMessage is what a worker of this build says of a run started
// under rules version v (workflow.DefaultVersion, -1: the first release),
// which it does not run.
func RetiredMessage(id string, v int) string {
	return fmt.Sprintf(retiredStart+"%s was started under rules version %s, "+retiredPhrase+" "+
		"(this build runs rules versions %d to %d): a worker of %s runs it. "+
		"Drain such runs with that build before deploying this one: `toolgate versions` lists them "+retiredEnd,
		id, versionName(v), versionOldest, versionCurrent, retiredBuild)
}

// retiredPhrase is in every RetiredMessage, which starts with retiredStart
// and ends with retiredEnd.
const (
	retiredPhrase = "which this worker no longer runs"
	retiredStart  = "toolgate: run "
	retiredEnd    = "(docs/versions.md)"
)

// IsRetired reports whether msg holds a worker's refusal of a run of a
// retired rules version (RetiredMessage): a workflow task's failure, a
// query's error, a replay's.
func IsRetired(msg string) bool { return strings.Contains(msg, retiredPhrase) }

// RetiredIn is the RetiredMessage msg holds (a replay's error, say, which
// wraps it in the panic's stack), and whether it holds one.
func RetiredIn(msg string) (string, bool) {
	if !IsRetired(msg) {
		return "", false
	}
	i := strings.LastIndex(msg[:strings.Index(msg, retiredPhrase)], retiredStart)
	j := strings.Index(msg[max(i, 0):], retiredEnd)
	if i < 0 || j < 0 {
		return msg, true
	}
	return msg[i : i+j+len(retiredEnd)], true
}

func versionName(v int) string {
	if v == int(workflow.DefaultVersion) {
		return "-1 (the first release)"
	}
	return fmt.Sprint(v)
}

// retiredRun stops a worker of this build from running a run of a retired
// version: the workflow task fails with RetiredMessage (Temporal shows it as
// the task's failure, the worker logs it, a query answers it) and is retried,
// so the run stays open, untouched, for a worker that runs its version.
// Failing the run instead would end it under rules it was never held to.
func retiredRun(ctx workflow.Context, v workflow.Version) {
	if v >= versionOldest {
		return
	}
	panic(RetiredMessage(workflow.GetInfo(ctx).WorkflowExecution.ID, int(v)))
}
