package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toolgate/toolgate/signed"
)

func TestWhoMayDecide(t *testing.T) {
	p, err := Parse([]byte(examplePolicy() + "  noop: {}\n"))
	require.NoError(t, err)

	key, ok := p.Key("bob")
	require.True(t, ok)
	assert.Equal(t, testKey(2), signed.FormatPublicKey(key))
	_, ok = p.Key("mallory")
	assert.False(t, ok)

	assert.Equal(t, []string{"support"}, p.Roles("alice"))
	assert.Nil(t, p.Roles("mallory"))
	p.Roles("alice")[0] = "finance"
	assert.Equal(t, []string{"support"}, p.Roles("alice"), "Roles returns a copy")

	tests := []struct {
		name string
		need Approvers
		want string
	}{
		{"alice", finance1, "alice holds [support]; this call needs one of [finance]"},
		{"bob", finance2, ""},
		{"alice", Approvers{}, ""},
		{"alice", Approvers{Roles: []string{"finance", "support"}}, ""},
		{"mallory", Approvers{}, `"mallory" is not an approver of this worker's policy`},
		{"mallory", finance1, `"mallory" is not an approver of this worker's policy`},
	}
	for _, tc := range tests {
		err := p.Eligible(tc.name, tc.need)
		if tc.want == "" {
			assert.NoError(t, err, "%s %v", tc.name, tc.need)
		} else {
			assert.EqualError(t, err, tc.want)
		}
	}

	assert.True(t, p.ShareRole("bob", "carol"))
	assert.False(t, p.ShareRole("alice", "bob"))
	assert.False(t, p.ShareRole("bob", "mallory"))
	assert.False(t, p.ShareRole("mallory", "mallory"))

	assert.Equal(t, finance1, p.ToolApprovers("refund"))
	assert.Equal(t, Approvers{Roles: []string{"support"}, Count: 1}, p.ToolApprovers("close_ticket"))
	assert.Equal(t, anyone, p.ToolApprovers("noop"))
	assert.Equal(t, anyone, p.ToolApprovers("unknown"))
	ta := p.ToolApprovers("refund")
	ta.Roles[0] = "x"
	assert.Equal(t, finance1, p.ToolApprovers("refund"), "ToolApprovers returns a copy")
}

// TestOperator: only an approver holding one of the operators' roles may
// rewind or fork; a policy with no operators lets nobody; Validate refuses
// an operators role no approver holds.
func TestOperator(t *testing.T) {
	p := &Policy{Approvers: map[string]Approver{
		"alice": {Key: testKey(1), Roles: []string{"sre"}},
		"bob":   {Key: testKey(2), Roles: []string{"support"}},
		"carol": {Key: testKey(3)},
	}}
	require.ErrorContains(t, p.Operator("alice"), "names no operators")
	p.Operators = []string{"sre"}
	require.NoError(t, p.Validate())
	require.NoError(t, p.Operator("alice"))
	require.ErrorContains(t, p.Operator("bob"), "bob holds [support]; rewinding or forking a run needs one of the operators' roles [sre]")
	require.ErrorContains(t, p.Operator("carol"), "carol holds no role")
	require.ErrorContains(t, p.Operator("mallory"), `"mallory" is not an approver`)
	p.Operators = []string{"sre", "nobody"}
	require.ErrorContains(t, p.Validate(), `operators[1]: no approver holds role "nobody"`)
}

// An approver decides by link only through a channel their via names, with
// its address, under a policy with a via_key; Validate says what is missing.
func TestDecidingByLink(t *testing.T) {
	text := "via_key: \"" + testKey(9) + "\"\napprovers:\n" +
		"  alice: {key: \"" + testKey(1) + "\", slack: U0ALICE, email: alice@example.com, via: [slack, email]}\n" +
		"  bob:   {key: \"" + testKey(2) + "\", email: bob@example.com}\n"
	p, err := Parse([]byte(text))
	require.NoError(t, err)
	assert.NoError(t, p.DecidesVia("alice", ViaSlack))
	assert.NoError(t, p.DecidesVia("alice", ViaEmail))
	assert.EqualError(t, p.DecidesVia("bob", ViaEmail), "bob may not decide through email (their via is []): sign the decision with your key")
	assert.EqualError(t, p.DecidesVia("mallory", ViaEmail), `"mallory" is not an approver of this worker's policy`)
	name, ok := p.BySlack("U0ALICE")
	assert.True(t, ok)
	assert.Equal(t, "alice", name)
	_, ok = p.BySlack("")
	assert.False(t, ok, "an empty id is nobody's")
	key, ok := p.ViaPublicKey()
	require.True(t, ok)
	assert.Equal(t, testKey(9), signed.FormatPublicKey(key))
	c := p.clone()
	assert.Equal(t, p.ViaKey, c.ViaKey, "a compiled policy keeps the via key")
	assert.Equal(t, p.Approvers["alice"].Via, c.Approvers["alice"].Via)

	for want, text := range map[string]string{
		"deciding by link needs the policy's via_key": "approvers:\n  alice: {key: \"" + testKey(1) + "\", email: a@example.com, via: [email]}\n",
		"slack needs the approver's Slack user id":    "via_key: \"" + testKey(9) + "\"\napprovers:\n  alice: {key: \"" + testKey(1) + "\", via: [slack]}\n",
		"email needs the approver's address":          "via_key: \"" + testKey(9) + "\"\napprovers:\n  alice: {key: \"" + testKey(1) + "\", via: [email]}\n",
		`"sms": want slack or email`:                  "via_key: \"" + testKey(9) + "\"\napprovers:\n  alice: {key: \"" + testKey(1) + "\", via: [sms]}\n",
		"is not a Slack user id":                      "approvers:\n  alice: {key: \"" + testKey(1) + "\", slack: \"<@here>\"}\n",
		"want a bare address":                         "approvers:\n  alice: {key: \"" + testKey(1) + "\", email: \"Alice <a@example.com>\"}\n",
		"needs a key of its own":                      "via_key: \"" + testKey(1) + "\"\napprovers:\n  alice: {key: \"" + testKey(1) + "\"}\n",
	} {
		_, err := Parse([]byte(text))
		assert.ErrorContains(t, err, want)
	}
}
