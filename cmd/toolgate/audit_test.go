package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/signed"
)

const auditHistories = "../../testsuite/histories/retired" // audited as recorded: audit runs no workflow code

func runAudit(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), append([]string{"audit"}, args...), strings.NewReader(""), &stdout, &stderr)
	return stdout.String(), err
}

func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	return 1
}

func TestAuditVerified(t *testing.T) {
	out, err := runAudit(t, filepath.Join(auditHistories, "policy_quorum.json"), filepath.Join(auditHistories, "policy_edit.json"))
	require.NoError(t, err, out)
	assert.Contains(t, out, "run fixture-policy_quorum\npolicy: recorded in the history (approvers alice, bob, carol, dave)\n")
	lines := strings.Split(out, "\n")
	var rows []string
	for _, l := range lines {
		if strings.HasPrefix(l, "20") { // a row starts with its time
			rows = append(rows, strings.Join(strings.Fields(l)[1:], " "))
		}
	}
	assert.Equal(t, []string{
		"start start - dave - - - verified",
		"approve update c-1 bob large-refunds 5047d101fb25 counted verified",
		"approve update c-1 carol large-refunds 5047d101fb25 approved verified",
		"grant update - carol - - g-1 refund verified",
		"approve (edit f5eb93faf949) update c-1 bob - 8d94314b3036 approved verified",
		"grant-use trace c-2 grant:carol - 063561713fea grant g-1, use 1 of 1 verified",
	}, append(rows[0:3:3], rows[4:7]...), "the decisions")
	require.Len(t, rows, 9)
	assert.Equal(t, []string{
		`c-1 refund {"amount_cents":30000,"booking_id":"BK-2"} 5047d101fb25 bob, carol matches: approved by bob, carol (needed 2 distinct approvers with role finance, as rule large-refunds asks)`,
		`c-1 refund {"amount_cents":8000,"booking_id":"BK-1"} f5eb93faf949 bob matches: approved by bob (needed 1 approver with role finance, as the tool's default asks)`,
		`c-2 refund {"amount_cents":5000,"booking_id":"BK-1"} 063561713fea grant:carol matches: grant g-1 by carol (refund when args.amount_cents <= 5000), answering ask by the tool's default for 1 approver with role finance`,
	}, []string{rows[3], rows[7], rows[8]}, "the executed calls")
	assert.Equal(t, 2, strings.Count(out, "note: "+audit.NoteUnvouchedPolicy+": whoever answered the run's first workflow task wrote it"), "once per history")
	assert.Equal(t, 2, strings.Count(out, "note: the server recorded no principals in this history"), "once per history")
	assert.Contains(t, out, "3 decisions, 0 not verified\nexecuted calls, each matched to what let it run:\n")
	assert.Contains(t, out, "1 executed call checked\n")
	assert.Contains(t, out, "2 executed calls checked\n")
	assert.Contains(t, out, "total: 6 decisions in 2 histories, 0 not verified; 3 executed calls checked, 0 not matching what let them run\n")
}

func TestAuditNoPolicy(t *testing.T) {
	out, err := runAudit(t, filepath.Join(auditHistories, "approve_v3.json"))
	require.NoError(t, err, "a run without a policy is no audit failure")
	assert.Contains(t, out, "no policy: decisions were unauthenticated\n")
	assert.Contains(t, out, "NOT VERIFIED: unsigned (the worker had no policy)")
	assert.Contains(t, out, "1 decision, 1 not verified\n")
}

// editUpdate rewrites the payload of the fixture's first approve update
// (base64 JSON in the exported history) and writes the result to a temp file.
func editUpdate(t *testing.T, fixture string, change func(map[string]any)) string {
	t.Helper()
	return editPayload(t, fixture, `"name": "approve"`, change)
}

// editPayload rewrites the first payload after the first occurrence of
// after in the fixture's JSON and writes the result to a temp file.
func editPayload(t *testing.T, fixture, after string, change func(map[string]any)) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(auditHistories, fixture))
	require.NoError(t, err)
	s := string(src)
	i := strings.Index(s, after)
	require.Positive(t, i)
	j := strings.Index(s[i:], `"data": "`) + i + len(`"data": "`)
	k := strings.IndexByte(s[j:], '"') + j
	raw, err := base64.StdEncoding.DecodeString(s[j:k])
	require.NoError(t, err)
	var in map[string]any
	require.NoError(t, json.Unmarshal(raw, &in))
	change(in)
	raw, err = json.Marshal(in)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), fixture)
	require.NoError(t, os.WriteFile(file, []byte(s[:j]+base64.StdEncoding.EncodeToString(raw)+s[k:]), 0o644))
	return file
}

// A token whose signature was changed in the exported JSON fails the audit.
func TestAuditTampered(t *testing.T) {
	file := editUpdate(t, "policy_rule.json", func(in map[string]any) {
		tok := in["token"].(string)
		i := strings.LastIndexByte(tok, '.') + 20
		c := "A"
		if tok[i] == 'A' {
			c = "B"
		}
		in["token"] = tok[:i] + c + tok[i+1:]
	})
	out, err := runAudit(t, file)
	assert.Equal(t, 1, exitCode(err), out)
	assert.ErrorContains(t, err, "audit failed: 1 decision not verified")
	assert.Regexp(t, `approve +update +c-3 +alice .*NOT VERIFIED: bad signature`, out)
	assert.Contains(t, out, "3 decisions, 1 not verified, 1 of them FAIL the audit\n")
}

// The history: the refund that ran was changed from what bob and
// carol approved. Every signature verifies; the executed call does not
// match, and the audit fails saying which call, what ran and what was
// approved.
func TestAuditTamperedExecution(t *testing.T) {
	file := editPayload(t, "policy_quorum.json", `"activityTaskScheduledEventAttributes"`, func(req map[string]any) {
		req["args"].(map[string]any)["amount_cents"] = 4000000
	})
	out, err := runAudit(t, file)
	assert.Equal(t, 1, exitCode(err), out)
	assert.EqualError(t, err, "audit failed: 1 executed call not matching what let it run")
	assert.Contains(t, out, "3 decisions, 0 not verified\n")
	assert.Regexp(t, `c-1 +refund +\{"amount_cents":4000000,"booking_id":"BK-2"\} +[0-9a-f]{12} +bob, carol +MISMATCH: c-1 refund ran \{"amount_cents":4000000,"booking_id":"BK-2"\} \(digest [0-9a-f]{12}…\), `+
		`but it needed 2 distinct approvers with role finance approving what ran \(as rule large-refunds asks\), and has 0; `+
		`what was approved: bob approved digest 5047d101fb25… = \{"amount_cents":30000,"booking_id":"BK-2"\}; carol approved digest 5047d101fb25… = \{"amount_cents":30000,"booking_id":"BK-2"\}\n`, out)
	assert.Contains(t, out, "1 executed call checked, 1 of them do NOT match what let them run: they FAIL the audit\n")

	// against the policy kept apart (the one the run recorded), no note says
	// the policy cannot be vouched for
	pol := filepath.Join(t.TempDir(), "policy.json")
	rep, err := audit.File(filepath.Join(auditHistories, "policy_quorum.json"), nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(pol, must(json.Marshal(rep.Policy)), 0o644))
	out, err = runAudit(t, file, "--policy", pol)
	assert.Equal(t, 1, exitCode(err), out)
	assert.Contains(t, out, "MISMATCH: c-1 refund ran")
	assert.NotContains(t, out, "cannot vouch")
	assert.Contains(t, out, "the one the history records\n")
	assert.EqualError(t, err, "audit failed: 1 executed call not matching what let it run")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Text from the run (here an unsigned approver's name) is printed escaped.
func TestAuditEscapes(t *testing.T) {
	file := editUpdate(t, "approve_v3.json", func(in map[string]any) { in["approver"] = hostileUTF8 })
	out, err := runAudit(t, file)
	require.NoError(t, err)
	assert.Contains(t, out, `\x1b[31mred`)
	for _, r := range out {
		if r != '\n' {
			assert.False(t, mustEscape(r, false), "%q printed raw", r)
		}
	}
}

// --policy verifies against a policy file kept apart: one with another key
// for alice fails her approval, and says which policy was used.
func TestAuditPolicyFile(t *testing.T) {
	keys := map[string]string{}
	for _, name := range []string{"alice", "bob", "carol", "dave"} {
		pub, _, err := signed.GenerateKey()
		require.NoError(t, err)
		keys[name] = signed.FormatPublicKey(pub)
	}
	pol := `approvers:
  alice: {key: "` + keys["alice"] + `", roles: [support]}
  bob:   {key: "` + keys["bob"] + `", roles: [finance]}
tools:
  close_ticket:
    approvers: {roles: [support]}
  refund:
    rules:
      - {id: small-refunds, when: "args.amount_cents <= 3000", decide: allow}
      - {id: no-test-refunds, when: "has(args.reason) && args.reason.contains('test')", decide: deny}
`
	file := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(file, []byte(pol), 0o644))
	out, err := runAudit(t, filepath.Join(auditHistories, "policy_rule.json"), "--policy", file)
	assert.Equal(t, 1, exitCode(err), out)
	assert.Contains(t, out, "policy: "+file+" (approvers alice, bob), not the one the history records\n")
	assert.Regexp(t, `rule +trace +c-1 +rule:small-refunds .* verified`, out)
	assert.Regexp(t, `approve +update +c-3 +alice .*NOT VERIFIED: bad signature`, out)
}

func TestAuditUsage(t *testing.T) {
	_, err := runAudit(t)
	assert.ErrorContains(t, err, "usage: toolgate audit")
	out, err := runAudit(t, filepath.Join(t.TempDir(), "missing.json"))
	assert.Equal(t, 1, exitCode(err))
	assert.Contains(t, out, "missing.json")
}

// shadowedPolicy is a policy whose deny rule comes after an allow rule of
// the same tool, its keys filled in.
func shadowedPolicy(t *testing.T) string {
	t.Helper()
	pub, _, err := signed.GenerateKey()
	require.NoError(t, err)
	pub2, _, err := signed.GenerateKey()
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "shadowed.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`approvers:
  bob: {key: "`+signed.FormatPublicKey(pub)+`", roles: [finance]}
  carol: {key: "`+signed.FormatPublicKey(pub2)+`", roles: [finance]}
tools:
  refund:
    rules:
      - {id: small-refunds, when: "args.amount_cents <= 5000", decide: allow}
      - {id: no-test-refunds, when: "has(args.reason) && args.reason.contains('test')", decide: deny}
`), 0o644))
	return file
}

const shadowWarning = ": tool refund: deny rule no-test-refunds (tools.refund.rules[1]) comes after allow rule small-refunds (rules[0])"

// audit --policy warns on stderr about a deny rule an earlier allow shadows.
func TestAuditPolicyWarns(t *testing.T) {
	file := shadowedPolicy(t)
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"audit", "--policy", file, filepath.Join(auditHistories, "approve_v3.json")},
		strings.NewReader(""), &stdout, &stderr)
	// (the history records no policy: against one, its unsigned approval lets nothing run)
	assert.Equal(t, 1, exitCode(err), stdout.String())
	assert.Contains(t, stdout.String(), "MISMATCH: c-3 close_ticket ran")
	assert.Contains(t, stderr.String(), "policy: warning: "+file+shadowWarning)
	assert.NotContains(t, stdout.String(), "warning", "the warning goes to stderr only")
}

// dev and worker load their --policy through workerOptions, which warns.
func TestWarnPolicyWorkerOptions(t *testing.T) {
	file := shadowedPolicy(t)
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	sv := servingFlags(fs)
	require.NoError(t, fs.Parse([]string{"--policy", file}))
	var stderr bytes.Buffer
	wo, err := sv.workerOptions(&telemetry{}, &stderr)
	require.NoError(t, err)
	require.NotNil(t, wo.policy)
	assert.Equal(t, "policy: warning: "+file+shadowWarning+": a call both match is allowed, so no-test-refunds never denies it (small-refunds shadows it); put no-test-refunds first\n", stderr.String())
}

// auditRows is each table row of audit's output without its time.
func auditRows(out string) []string {
	var rows []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "20") { // a row starts with its time
			rows = append(rows, strings.Join(strings.Fields(l)[1:], " "))
		}
	}
	return rows
}

// A rewind (rules version 7) is listed as its own entry from the rewound
// signal, and a fork's start as a fork, each verified as an operator's act.
func TestAuditRewindAndFork(t *testing.T) {
	out, err := runAudit(t, filepath.Join(auditHistories, "rewound_v7.json"), filepath.Join(auditHistories, "forked_v7.json"))
	require.NoError(t, err, out)
	rows := auditRows(out)
	require.Len(t, rows, 6, out)
	assert.Equal(t, "rewind signal c-2 dave - 0bee20c786db rewound to just before c-2 (step 2): run 01a2327d-b6d1-7257-8b84-ad8e8451e322 reset to event 14 verified", rows[0])
	assert.Equal(t, `fork start c-2 dave - - fork of fixture-forked-source at c-2, its arguments replaced with {"ticket_id":"TKT-1"} verified`, rows[3])
	assert.Contains(t, out, "total: 4 decisions in 2 histories, 0 not verified; 2 executed calls checked, 0 not matching what let them run\n")
}

// A rewind note whose token was made to name alice (no operator) fails the
// audit, and so does the reset it no longer attributes.
func TestAuditRewindTampered(t *testing.T) {
	file := editPayload(t, "rewound_v7.json", `"signalName": "rewound"`, func(n map[string]any) {
		parts := strings.Split(n["token"].(string), ".")
		raw := must(base64.RawURLEncoding.DecodeString(parts[1]))
		var c map[string]any
		require.NoError(t, json.Unmarshal(raw, &c))
		c["sub"] = "alice"
		parts[1] = base64.RawURLEncoding.EncodeToString(must(json.Marshal(c)))
		n["token"] = strings.Join(parts, ".")
	})
	out, err := runAudit(t, file)
	assert.Equal(t, 1, exitCode(err), out)
	assert.EqualError(t, err, "audit failed: 2 decisions not verified")
	rows := auditRows(out)
	require.Len(t, rows, 4, out)
	assert.Regexp(t, `^reset reset - - - - run 01a2327d-b6d1-7257-8b84-ad8e8451e322 reset: "toolgate rewind to just before c-2 \(step 2\) by dave, preview 0bee20c786db[0-9a-f]+" `+
		`NOT VERIFIED: unattributed reset: no verified rewind note \(an operator's signed rewind\) follows it`, rows[0])
	assert.Regexp(t, `^rewind signal c-2 alice - 0bee20c786db .* NOT VERIFIED: bad signature: not signed with alice's key in the policy$`, rows[1])
	assert.Contains(t, out, "3 decisions, 2 not verified, 2 of them FAIL the audit\n")
}
