package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
)

// principaled is a fixture as a server with toolgate's authorizer and
// principal propagation would have recorded it — the start and signals a
// person's (and the workflow task each scheduled), every other event a
// worker's — then changed, written to a temporary file.
func principaled(t *testing.T, fixture string, change func(*historypb.History)) string {
	t.Helper()
	f, err := os.Open(filepath.Join(auditHistories, fixture))
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	worker := &commonpb.Principal{Type: "worker", Name: "toolgate-worker"}
	var prev *commonpb.Principal
	for _, ev := range h.Events {
		p := worker
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			p = &commonpb.Principal{Type: "person", Name: "carol"}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			p = prev
		}
		ev.Principal, prev = p, p
	}
	if change != nil {
		change(h)
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), fixture)
	require.NoError(t, os.WriteFile(out, b, 0o644))
	return out
}

// eventOf is the history's event of id.
func eventOf(t *testing.T, h *historypb.History, id int64) *historypb.HistoryEvent {
	t.Helper()
	for _, ev := range h.Events {
		if ev.GetEventId() == id {
			return ev
		}
	}
	t.Fatalf("no event %d", id)
	return nil
}

func mallory() *commonpb.Principal { return &commonpb.Principal{Type: "person", Name: "mallory"} }

// A history whose every task and activity a worker wrote passes, saying so
// in one line; nothing says principals are missing.
func TestAuditPrincipalsAllWorkers(t *testing.T) {
	out, err := runAudit(t, principaled(t, "policy_quorum.json", nil))
	require.NoError(t, err, out)
	assert.Contains(t, out, "\n5 events checked for who wrote them (workflow tasks answered, activities closed, resets, terminations): each by a worker or the server\n")
	assert.NotContains(t, out, "recorded no principals")
}

// Issue 43, item 4: the refund's activity completed by a person, with a
// result of their own. Every signature verifies and what ran was approved;
// the audit names the event and fails.
func TestAuditForgedToolResult(t *testing.T) {
	out, err := runAudit(t, principaled(t, "policy_quorum.json", func(h *historypb.History) {
		ev := eventOf(t, h, 25)
		require.Equal(t, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, ev.GetEventType())
		ev.Principal = mallory()
	}))
	assert.Equal(t, 1, exitCode(err), out)
	assert.EqualError(t, err, "audit failed: 1 event written by neither a worker nor the server")
	assert.Contains(t, out, "3 decisions, 0 not verified\n")
	assert.Contains(t, out, "1 executed call checked\n")
	assert.Contains(t, out, "events written by neither a worker nor the server (by the server's principal):\n")
	assert.Regexp(t, `\n25 +ActivityTaskCompleted +person mallory +NOT A WORKER: activity refund \(call c-1\) completed by person "mallory", neither a worker nor the server: `+
		`its result is theirs, not the activity's: a forged result\n`, out)
	assert.Contains(t, out, "5 events checked for who wrote them, 1 of them by neither a worker nor the server: they FAIL the audit\n")
}

// Issue 43, items 2 and 3: a person's worker answered the run's first
// workflow task, recording the policy. The audit names the task and what it
// wrote, and the note on the recorded policy names who wrote it.
func TestAuditRogueWorkflowTask(t *testing.T) {
	out, err := runAudit(t, principaled(t, "policy_quorum.json", func(h *historypb.History) {
		for id := int64(4); id <= 10; id++ { // the first task's completion and what it wrote
			eventOf(t, h, id).Principal = mallory()
		}
	}))
	assert.Equal(t, 1, exitCode(err), out)
	assert.EqualError(t, err, "audit failed: 1 event written by neither a worker nor the server")
	assert.Regexp(t, `\n4 +WorkflowTaskCompleted +person mallory +NOT A WORKER: workflow task completed by person "mallory", neither a worker nor the server: `+
		`someone who is not a worker answered the run's workflow task, so what the run did in it is theirs; it wrote .*7 MarkerRecorded \(local activity toolgate.config: the run's tool specs and policy\)`, out)
	assert.Contains(t, out, `note: `+audit.NoteUnvouchedPolicy+`: whoever answered the run's first workflow task (here person "mallory", by the server's word) wrote it`)
}

// Some events carry a principal, one workflow task completion none: a gap,
// named, failing the audit.
func TestAuditPrincipalGap(t *testing.T) {
	out, err := runAudit(t, principaled(t, "policy_quorum.json", func(h *historypb.History) { eventOf(t, h, 13).Principal = nil }))
	assert.Equal(t, 1, exitCode(err), out)
	assert.Regexp(t, `\n13 +WorkflowTaskCompleted +- +NO PRINCIPAL: workflow task completed carries no principal, though the server stamped other events of this history`, out)
}

// writePolicy writes p as a policy file (JSON is YAML) and returns its path.
func writePolicy(t *testing.T, p *policy.Policy) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(file, must(json.Marshal(p)), 0o644))
	return file
}

// With --policy, the audit says whether the run recorded the file's
// policy: the same one passes (and no note says the policy cannot be vouched
// for); another — here one approver more, who decided nothing, so every
// signature still verifies — is named and fails the audit.
func TestAuditPolicyFileDiffers(t *testing.T) {
	fixture := filepath.Join(auditHistories, "policy_quorum.json")
	rep, err := audit.File(fixture, nil)
	require.NoError(t, err)

	same := writePolicy(t, rep.Policy)
	out, err := runAudit(t, fixture, "--policy", same)
	require.NoError(t, err, out)
	assert.Contains(t, out, "policy: "+same+" (approvers alice, bob, carol, dave), the one the history records\n")
	assert.NotContains(t, out, "cannot vouch")
	assert.NotContains(t, out, "NOT held")

	pub, _, err := signed.GenerateKey()
	require.NoError(t, err)
	rep.Policy.Approvers["erin"] = policy.Approver{Key: signed.FormatPublicKey(pub), Roles: []string{"finance"}}
	other := writePolicy(t, rep.Policy)
	out, err = runAudit(t, fixture, "--policy", other)
	assert.Equal(t, 1, exitCode(err), out)
	assert.EqualError(t, err, "audit failed: 1 run held to a policy other than "+other)
	assert.Contains(t, out, "policy: "+other+" (approvers alice, bob, carol, dave, erin), not the one the history records\n")
	assert.Contains(t, out, "the run was NOT held to "+other+", it FAILS the audit: approver \"erin\" is in the given policy only\n")
	assert.Contains(t, out, "3 decisions, 0 not verified\n", "the signatures alone do not tell")
}

// Without --policy the audit says, once per history, that it cannot vouch
// for the policy the run recorded and how to check against the real one,
// and that the server recorded no principals: notes, the exit status
// unchanged.
func TestAuditWithoutPolicyNotes(t *testing.T) {
	out, err := runAudit(t, filepath.Join(auditHistories, "policy_rule.json"))
	require.NoError(t, err, out)
	assert.Equal(t, 1, strings.Count(out, "note: "+audit.NoteUnvouchedPolicy+": "), out)
	assert.Contains(t, out, "To check against the real one: toolgate audit HISTORY.json --policy FILE, with the policy file your workers load\n")
	assert.Equal(t, 1, strings.Count(out, "note: the server recorded no principals in this history"), out)
	assert.Contains(t, out, "frontend.enablePrincipalPropagation")
}
