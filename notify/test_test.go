package notify

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/internal/smtptest"
)

func TestTestEveryKind(t *testing.T) {
	hook, hookGot := hookServer(t, http.StatusOK, "")
	slack, slackGot := hookServer(t, http.StatusOK, "ok")
	broken, _ := hookServer(t, http.StatusInternalServerError, "down for maintenance")
	mail := smtptest.Start(t, smtptest.Options{User: smtpUser, Password: smtpPass})
	c := &Config{Targets: []Target{
		{Name: "ops", Webhook: hook.URL + hookPath, Secret: hookSecret},
		{Name: "team", Slack: slack.URL + hookPath},
		{Name: "mail", SMTP: mail.Addr(), From: "toolgate@example.com", User: smtpUser, Password: smtpPass,
			To: []string{"ops@example.com"}, CAFile: mail.CAFile()},
		{Name: "nomail", SMTP: mail.Addr(), From: "toolgate@example.com", CAFile: mail.CAFile()},
		{Name: "broken", Webhook: broken.URL + hookPath, Secret: hookSecret},
	}}
	withLinks(t, c) // a test message carries no link all the same

	res := Test(context.Background(), c)
	require.Len(t, res, 5)
	for i, want := range []TestResult{
		{Target: "ops", Kind: KindWebhook, Detail: "HTTP 200"},
		{Target: "team", Kind: KindSlack, Detail: "HTTP 200"},
		{Target: "mail", Kind: KindEmail, Detail: "1 message: ops@example.com"},
	} {
		assert.Equal(t, want, res[i])
	}
	assert.Equal(t, "nomail", res[3].Target)
	require.Error(t, res[3].Err)
	assert.Equal(t, "a test message goes to to: addresses; this target has none", Reason("nomail", KindEmail, res[3].Err))
	assert.Equal(t, "broken", res[4].Target)
	require.Error(t, res[4].Err)
	assert.Equal(t, "HTTP 500: down for maintenance", Reason("broken", KindWebhook, res[4].Err))
	noSecrets(t, res[4].Err)

	r := <-hookGot
	assert.Equal(t, "test", r.header.Get("X-Toolgate-Event"))
	assert.NoError(t, VerifySignature(hookSecret, r.header.Get(SignatureHeader), r.body, time.Now(), time.Minute))
	var body map[string]any
	require.NoError(t, json.Unmarshal(r.body, &body))
	assert.Equal(t, "test", body["event"])
	assert.Equal(t, "ops", body["target"])
	assert.Nil(t, body["link"])

	text, blocks := slackBlocks(t, (<-slackGot).body)
	assert.Contains(t, text, "toolgate test message from notify target team")
	require.Len(t, blocks, 1)
	assert.Equal(t, "section", blocks[0]["type"])

	msgs := mail.Messages()
	require.Len(t, msgs, 1, "to: only")
	assert.Equal(t, []string{"ops@example.com"}, msgs[0].To)
	p := parseMessage(t, msgs[0].Data)
	assert.Equal(t, "[toolgate] test message", p.header.Get("Subject"))
	assert.Contains(t, p.body, "toolgate test message from notify target mail")
}
