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
