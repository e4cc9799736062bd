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

	"github.com/toolgate/toolgate/signed"
)

const auditHistories = "../../testsuite/histories"

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
	}, rows)
	assert.Contains(t, out, "3 decisions, 0 not verified\n")
	assert.Contains(t, out, "total: 6 decisions in 2 histories, 0 not verified\n")
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
	src, err := os.ReadFile(filepath.Join(auditHistories, fixture))
	require.NoError(t, err)
	s := string(src)
	i := strings.Index(s, `"name": "approve"`)
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
	file := filepath.Join(t.TempDir(), "shadowed.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`approvers:
  bob: {key: "`+signed.FormatPublicKey(pub)+`", roles: [finance]}
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
	require.NoError(t, err, stdout.String())
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
