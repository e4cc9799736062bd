package notify

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

const issueFile = `
targets:
  - {name: ops,  webhook: "https://hooks.example/toolgate", secret: "${TOOLGATE_HOOK_SECRET}"}
  - {name: team, slack: "${SLACK_WEBHOOK_URL}", signing_secret: "${SLACK_SIGNING_SECRET}", events: [waiting]}
  - {name: mail, smtp: "smtp.example:587", from: "toolgate@example.com", user: "${SMTP_USER}", password: "${SMTP_PASSWORD}"}
events: [waiting, decided, expired, blocked, failed]
link_base: "https://toolgate.example"
link_key_file: "/etc/toolgate/link.key"
`

var issueEnv = map[string]string{"TOOLGATE_HOOK_SECRET": "hook-secret", "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T/B/X",
	"SLACK_SIGNING_SECRET": "slack-secret", "SMTP_USER": "u", "SMTP_PASSWORD": "p"}

// The issue's file parses; what the runs are told of it names targets,
// kinds and events, and no address nor secret.
func TestParseTheIssuesFile(t *testing.T) {
	c, err := Parse([]byte(issueFile), env(issueEnv))
	require.NoError(t, err)
	require.Equal(t, "hook-secret", c.Targets[0].Secret)
	require.Equal(t, []string{"slack-secret"}, c.SlackSigningSecrets())
	require.Equal(t, []string{DefaultSlackResponsePrefix}, c.SlackResponsePrefixes())
	decl := c.Declared()
	require.Equal(t, []workflows.NotifyTarget{
		{Name: "ops", Kind: KindWebhook, Events: workflows.NotifyEvents},
		{Name: "team", Kind: KindSlack, Events: []string{"waiting"}},
		{Name: "mail", Kind: KindEmail, Events: workflows.NotifyEvents},
	}, decl)
	raw, err := json.Marshal(decl)
	require.NoError(t, err)
	for _, secret := range []string{"hook-secret", "slack-secret", "hooks.slack.com", "hooks.example", "smtp.example", "p\""} {
		require.NotContains(t, string(raw), secret, "the run's history records what Declared returns")
	}
}

// A variable that is not set is an error naming it (an empty secret would
// turn a check off), and a value cannot change the file's shape.
func TestParseExpandsTheEnvironmentSafely(t *testing.T) {
	_, err := Parse([]byte(issueFile), env(map[string]string{}))
	require.ErrorContains(t, err, "SLACK_SIGNING_SECRET, SLACK_WEBHOOK_URL, SMTP_PASSWORD, SMTP_USER, TOOLGATE_HOOK_SECRET")
	e := map[string]string{}
	for k, v := range issueEnv {
		e[k] = v
	}
	e["SLACK_SIGNING_SECRET"] = ""
	_, err = Parse([]byte(issueFile), env(e))
	require.ErrorContains(t, err, "not set (or empty): SLACK_SIGNING_SECRET")

	e["SLACK_SIGNING_SECRET"] = "x\", events: [waiting], secret: \"y\n  - {name: evil, webhook: \"https://evil.example\", secret: z}"
	c, err := Parse([]byte(issueFile), env(e))
	require.NoError(t, err)
	require.Len(t, c.Targets, 3, "a value adds no target")
	require.Equal(t, e["SLACK_SIGNING_SECRET"], c.Targets[1].SigningSecret, "it is one scalar, as given")

	c, err = Parse([]byte("# ${UNSET_IN_A_COMMENT}\ntargets: [{name: ops, webhook: \"https://h.example/${PATH_PART}\", secret: \"${S}\"}]\n"),
		env(map[string]string{"S": "s", "PATH_PART": "a b"}))
	require.NoError(t, err, "a comment is not expanded")
	require.Equal(t, "https://h.example/a b", c.Targets[0].Webhook)
}

// A refused URL is never quoted: a webhook's or Slack's URL is a credential.
func TestValidateNeverQuotesAURL(t *testing.T) {
	for _, u := range []string{"https://user:s3cr3t@hooks.example/x", "http://hooks.slack.com/services/T0/B0/SECRETPATH", "hooks.example/SECRETPATH", "https://[::1/SECRETPATH"} {
		_, err := Parse([]byte(`targets: [{name: ops, webhook: "`+u+`", secret: s}]`), env(nil))
		require.Error(t, err, u)
		require.NotContains(t, err.Error(), "s3cr3t", u)
		require.NotContains(t, err.Error(), "SECRETPATH", u)
	}
}

// Each mistake is refused, saying where and why.
func TestValidateRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ file, want string }{
		"no targets":           {`events: [waiting]`, "targets: none"},
		"webhook unsigned":     {`targets: [{name: ops, webhook: "https://h.example/x"}]`, "targets[0].secret: required"},
		"plain http":           {`targets: [{name: ops, webhook: "http://h.example/x", secret: s}]`, "want https (http only to a loopback address)"},
		"credentials in URL":   {`targets: [{name: ops, webhook: "https://u:p@h.example/x", secret: s}]`, "the URL holds credentials (not shown)"},
		"two kinds":            {`targets: [{name: ops, webhook: "https://h.example/x", slack: "https://s.example/x", secret: s}]`, "exactly one of webhook, slack and smtp"},
		"same name":            {`targets: [{name: ops, webhook: "https://h.example/x", secret: s}, {name: ops, webhook: "https://h.example/y", secret: s}]`, `"ops": given twice`},
		"bad name":             {`targets: [{name: "Ops Team", webhook: "https://h.example/x", secret: s}]`, "want 1-32 of a-z"},
		"unknown event":        {`targets: [{name: ops, webhook: "https://h.example/x", secret: s}]` + "\nevents: [approved]", `unknown event "approved"`},
		"link without key":     {`targets: [{name: ops, webhook: "https://h.example/x", secret: s}]` + "\nlink_base: https://tg.example", "link_key_file: required with link_base"},
		"smtp from":            {`targets: [{name: m, smtp: "mail.example:587", from: "not an address"}]`, "targets[0].from"},
		"smtp half auth":       {`targets: [{name: m, smtp: "mail.example:587", from: "a@example.com", user: u}]`, "user and password go together"},
		"slack secret on hook": {`targets: [{name: ops, webhook: "https://h.example/x", secret: s, signing_secret: t}]`, "belong to a slack target"},
		"unknown key":          {`targets: [{name: ops, webhook: "https://h.example/x", secret: s, sekret: t}]`, "field sekret not found"},
		"long timeout":         {`targets: [{name: ops, webhook: "https://h.example/x", secret: s, timeout: 5m}]`, "want a duration up to 30s"},
	} {
		_, err := Parse([]byte(tc.file), env(nil))
		require.ErrorContains(t, err, tc.want, name)
	}
}

// Load reads the link key named by link_key_file.
func TestLoadReadsTheLinkKey(t *testing.T) {
	dir := t.TempDir()
	_, priv, err := signed.GenerateKey()
	require.NoError(t, err)
	keyFile := filepath.Join(dir, "link.key")
	require.NoError(t, signed.WritePrivateKey(keyFile, priv))
	file := filepath.Join(dir, "notify.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`targets: [{name: ops, webhook: "http://127.0.0.1:9/x", secret: "${S}"}]
link_base: http://127.0.0.1:8080
link_key_file: `+keyFile+"\n"), 0o600))
	c, err := LoadWith(file, env(map[string]string{"S": "s"}))
	require.NoError(t, err)
	require.Equal(t, priv, c.LinkKey())
	require.NoError(t, os.Remove(keyFile))
	_, err = LoadWith(file, env(map[string]string{"S": "s"}))
	require.ErrorContains(t, err, "link_key_file")
}

// A link binds run, call, arguments, recipient and channel until it
// expires, and nothing but a link verifies as one.
func TestLinks(t *testing.T) {
	pub, priv, err := signed.GenerateKey()
	require.NoError(t, err)
	_, other, err := signed.GenerateKey()
	require.NoError(t, err)
	now := time.Unix(1_800_000_000, 0)
	l := Link{WorkflowID: "run-1", CallID: "c-3", ArgsDigest: strings.Repeat("ab", 32), Asked: 1_799_999_000_000_000_000, Recipient: "alice", Channel: ViaEmail, Expires: now.Add(time.Hour)}
	tok, err := SignLink(priv, l, now)
	require.NoError(t, err)
	got, err := VerifyLink(pub, tok, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, l, got)

	_, err = VerifyLink(pub, tok, now.Add(time.Hour))
	require.ErrorContains(t, err, "link expired")
	forged, err := SignLink(other, l, now)
	require.NoError(t, err)
	_, err = VerifyLink(pub, forged, now)
	require.ErrorContains(t, err, "link refused")
	tampered := tok[:len(tok)-3] + map[bool]string{true: "AAA", false: "BBB"}[!strings.HasSuffix(tok, "AAA")]
	_, err = VerifyLink(pub, tampered, now)
	require.Error(t, err)
	decision, err := signed.Sign(priv, signed.Claims{Approver: "alice", WorkflowID: "run-1", Action: signed.ActionApprove, CallID: "c-3",
		ArgsDigest: l.ArgsDigest, Via: ViaEmail, IssuedAt: now.Unix(), Expiry: now.Add(time.Minute).Unix()})
	require.NoError(t, err)
	_, err = VerifyLink(pub, decision, now)
	require.ErrorContains(t, err, `a token for "approve", not a link`)

	long := l
	long.Expires = now.Add(30 * 24 * time.Hour)
	tok, err = SignLink(priv, long, now)
	require.NoError(t, err)
	got, err = VerifyLink(pub, tok, now)
	require.NoError(t, err)
	require.Equal(t, now.Add(MaxLinkLifetime), got.Expires, "no link outlives MaxLinkLifetime")
	_, err = SignLink(priv, Link{WorkflowID: "run-1", CallID: "c-3", Recipient: "alice", Channel: ViaEmail, Expires: now.Add(time.Hour)}, now)
	require.ErrorContains(t, err, "required")
	_, err = SignLink(priv, Link{WorkflowID: "run-1", CallID: "c-3", ArgsDigest: "d", Asked: 1_799_999_000_000_000_000, Recipient: "alice", Channel: ViaEmail, Expires: now}, now)
	require.ErrorContains(t, err, "not after now")
}
