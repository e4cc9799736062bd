package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseExample(t *testing.T) {
	p, err := Parse([]byte(examplePolicy()))
	require.NoError(t, err)
	require.Len(t, p.Approvers, 3)
	assert.Equal(t, Approver{Key: testKey(1), Roles: []string{"support"}}, p.Approvers["alice"])
	refund := p.Tools["refund"]
	require.Len(t, refund.Rules, 3)
	assert.Equal(t, Rule{ID: "large-refunds", When: "args.amount_cents > 50000", Decide: Ask,
		Approvers: &Approvers{Roles: []string{"finance"}, Count: 2}}, refund.Rules[1])
	assert.Equal(t, &Approvers{Roles: []string{"finance"}}, refund.Approvers)
	assert.Equal(t, &Approvers{Roles: []string{"support"}}, p.Tools["close_ticket"].Approvers)
}

func TestParseJSON(t *testing.T) {
	src := "{\n\t\"approvers\": {\"alice\": {\"key\": \"" + testKey(1) + "\", \"roles\": [\"support\"]}},\n" +
		"\t\"tools\": {\"refund\": {\"rules\": [{\"id\": \"r1\", \"when\": \"args.amount_cents < 10\", \"decide\": \"allow\"}]}}\n}"
	p, err := Parse([]byte(src))
	require.NoError(t, err)
	assert.Equal(t, "r1", p.Tools["refund"].Rules[0].ID)
}

func TestParseRefusals(t *testing.T) {
	ex := examplePolicy()
	keys := "approvers:\n  alice: {key: \"" + testKey(1) + "\", roles: [support]}\n  bob: {key: \"" + testKey(2) + "\", roles: [finance]}\n"
	rule := func(r string) string { return keys + "tools:\n  refund:\n    rules:\n      - " + r + "\n" }
	tests := []struct {
		name, src, want string
	}{
		{"unknown top key", ex + "extra: 1\n", "field extra not found"},
		{"unknown rule key", rule(`{id: a, when: "true", decide: allow, whn: "x"}`), "field whn not found"},
		{"duplicate key", keys + "  alice: {key: \"" + testKey(3) + "\"}\n", `mapping key "alice" already defined`},
		{"duplicate nested key", rule(`{id: a, id: b, when: "true", decide: allow}`), `mapping key "id" already defined`},
		{"empty document", "", "empty document"},
		{"comment only", "# nothing\n", "empty document"},
		{"not a mapping", "- a\n- b\n", "not a mapping"},
		{"null document", "null\n", "not a mapping"},
		{"two documents", ex + "---\napprovers: {}\n", "second document"},
		{"no approvers", "tools: {}\n", "approvers: none declared"},
		{"bad decide", rule(`{id: a, when: "true", decide: maybe}`), `tools.refund.rules[0].decide: "maybe", want allow, ask or deny`},
		{"missing decide", rule(`{id: a, when: "true"}`), `tools.refund.rules[0].decide: missing`},
		{"empty when", rule(`{id: a, when: "", decide: allow}`), "tools.refund.rules[0].when: missing"},
		{"no when", rule(`{id: a, decide: allow}`), "tools.refund.rules[0].when: missing"},
		{"CEL syntax error", rule(`{id: a, when: "args.amount_cents <=", decide: allow}`), "tools.refund.rules[0].when: ERROR"},
		{"CEL undeclared", rule(`{id: a, when: "amount > 1", decide: allow}`), "undeclared reference to 'amount'"},
		{"non-bool when", rule(`{id: a, when: "args.amount_cents + 1", decide: allow}`), "tools.refund.rules[0].when: type int, want bool"},
		{"string when", rule(`{id: a, when: "'yes'", decide: allow}`), "type string, want bool"},
		{"time zone overload", rule(`{id: a, when: "timestamp('2024-01-01T00:00:00Z').getHours('Europe/Paris') > 1", decide: allow}`), "tools.refund.rules[0].when: ERROR: <input>:1:43: found no matching overload for 'getHours'"},
		{"long when", rule(`{id: a, when: "` + strings.Repeat("true && ", 300) + `true", decide: allow}`), "at most 2048"},
		{"unknown role", keys + "tools:\n  refund:\n    approvers: {roles: [legal]}\n", `tools.refund.approvers.roles[0]: no approver holds role "legal"`},
		{"unknown role in rule", rule(`{id: a, when: "true", decide: ask, approvers: {roles: [legal]}}`), `tools.refund.rules[0].approvers.roles[0]: no approver holds role "legal"`},
		{"count too large", ex + "  wire:\n    approvers: {roles: [finance], count: 3}\n", "tools.wire.approvers.count: 3 approvals needed but only 2 approvers hold one of [finance]; no quorum could ever be met"},
		{"count beyond all approvers", keys + "tools:\n  refund:\n    approvers: {count: 3}\n", "only 2 approvers are declared"},
		{"negative count", keys + "tools:\n  refund:\n    approvers: {count: -1}\n", "tools.refund.approvers.count: -1"},
		{"approvers on allow", rule(`{id: a, when: "true", decide: allow, approvers: {roles: [finance]}}`), "tools.refund.rules[0].approvers: only a rule that decides ask"},
		{"bad key", "approvers:\n  alice: {key: \"ed25519:short\"}\n", "approvers.alice.key: public key"},
		{"missing key", "approvers:\n  alice: {roles: [support]}\n", "approvers.alice.key"},
		{"shared key", "approvers:\n  alice: {key: \"" + testKey(1) + "\"}\n  bob: {key: \" " + testKey(1) + "\"}\n", "approvers.bob.key: the same key as approver alice"},
		{"duplicate rule id", keys + "tools:\n  a:\n    rules: [{id: r, when: \"true\", decide: allow}]\n  b:\n    rules: [{id: r, when: \"true\", decide: deny}]\n", `tools.b.rules[0].id: "r" is also the id of tools.a.rules[0]`},
		{"missing rule id", rule(`{when: "true", decide: allow}`), "tools.refund.rules[0].id: missing"},
		{"bad rule id", rule(`{id: "Big Rule", when: "true", decide: allow}`), `tools.refund.rules[0].id: "Big Rule" must match`},
		{"bad approver name", "approvers:\n  Alice: {key: \"" + testKey(1) + "\"}\n", `approvers.Alice: name "Alice" must match`},
		{"bad role", "approvers:\n  alice: {key: \"" + testKey(1) + "\", roles: [\"\"]}\n", `approvers.alice.roles[0]: role "" must match`},
		{"empty tool name", keys + "tools:\n  \"\": {}\n", "a tool name must not be empty"},
		{"count not int", keys + "tools:\n  refund:\n    approvers: {count: two}\n", "cannot unmarshal"},
		{"shadow not bool", rule(`{id: a, when: "true", decide: deny, shadow: maybe}`), "cannot unmarshal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.src))
			require.Error(t, err)
			assert.Nil(t, p)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestValidateBounds(t *testing.T) {
	p := &Policy{Approvers: map[string]Approver{}}
	for i := range MaxApprovers + 1 {
		p.Approvers[string(rune('a'+i%26))+strings.Repeat("x", i/26)] = Approver{Key: testKey(byte(i))}
	}
	assert.ErrorContains(t, p.Validate(), "approvers: 257 declared, at most 256")

	p = &Policy{Approvers: map[string]Approver{"alice": {Key: testKey(1)}}, Tools: map[string]Tool{"t": {}}}
	for range MaxRulesPerTool + 1 {
		p.Tools["t"] = Tool{Rules: append(p.Tools["t"].Rules, Rule{ID: "r" + strings.Repeat("x", len(p.Tools["t"].Rules)), When: "true", Decide: Allow})}
	}
	assert.ErrorContains(t, p.Validate(), "tools.t.rules: 65 rules, at most 64")
	assert.ErrorContains(t, (*Policy)(nil).Validate(), "nil")
}

func TestValidateIsDeterministic(t *testing.T) {
	src := "approvers:\n  zed: {key: bad}\n  amy: {key: bad}\n  kim: {key: bad}\ntools:\n  z: {rules: [{id: X}]}\n  a: {rules: [{id: Y}]}\n"
	_, err := Parse([]byte(src))
	require.Error(t, err)
	first := err.Error()
	for range 20 {
		_, err := Parse([]byte(src))
		assert.Equal(t, first, err.Error())
	}
	assert.Less(t, strings.Index(first, "approvers.amy"), strings.Index(first, "approvers.zed"))
	assert.Less(t, strings.Index(first, "tools.a."), strings.Index(first, "tools.z."))
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(good, []byte(examplePolicy()), 0o600))
	p, err := Load(good)
	require.NoError(t, err)
	assert.Len(t, p.Tools, 2)

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("approvers: {}\n"), 0o600))
	_, err = Load(bad)
	assert.ErrorContains(t, err, bad)

	big := filepath.Join(dir, "big.yaml")
	require.NoError(t, os.WriteFile(big, make([]byte, MaxFileSize+1), 0o600))
	_, err = Load(big)
	assert.ErrorContains(t, err, "larger than")

	_, err = Load(filepath.Join(dir, "missing.yaml"))
	assert.ErrorContains(t, err, "missing.yaml")
}

func TestCheckTools(t *testing.T) {
	p, err := Parse([]byte(examplePolicy()))
	require.NoError(t, err)
	assert.NoError(t, p.CheckTools([]string{"refund", "close_ticket", "search"}))
	err = p.CheckTools([]string{"refunds", "close_ticket"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"refund"`)
	assert.NotContains(t, err.Error(), `"close_ticket" (`)
	assert.Error(t, p.CheckTools(nil))
	assert.NoError(t, (&Policy{}).CheckTools(nil))
}
