package policy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func guardPolicy(guards string) string { return examplePolicy() + "guards:\n" + guards }

// Guards parse, compile and say what they cover and need.
func TestGuardsCompile(t *testing.T) {
	e := mustCompile(t, guardPolicy(`
  - {id: budget, kind: budget, tools: [refund], amount: "args.amount_cents", limit: 50000, window: 1h}
  - {id: writes, kind: rate, limit: 10, window: 1m, per: requester, exceed: ask, approvers: {roles: [finance], count: 2}}
  - {id: loops, kind: repeat, tools: [close_ticket], limit: 3, window: 10m}
`))
	gs := e.Guards()
	require.Len(t, gs, 3)
	assert.True(t, gs[0].Covers("refund", true))
	assert.False(t, gs[0].Covers("close_ticket", true))
	assert.True(t, gs[1].Covers("close_ticket", true), "no tools: every destructive tool")
	assert.False(t, gs[1].Covers("search_tickets", false), "no tools: no read")
	assert.Equal(t, Approvers{Roles: []string{"finance"}, Count: 2}, e.Policy().GuardNeed(gs[1], "refund"))
	assert.Equal(t, Approvers{Roles: []string{"support"}, Count: 1}, e.Policy().GuardNeed(gs[2], "close_ticket"), "no approvers of its own: the tool's")
	assert.Equal(t, PerAll, gs[0].PerOrAll())
	assert.Equal(t, Deny, gs[0].ExceedOrDeny())
	assert.True(t, e.Policy().Guarded("refund", true))
	assert.False(t, e.Policy().Guarded("search_tickets", false))
	assert.True(t, e.Policy().HasLedger())
	n, err := e.GuardAmount(0, "refund", []byte(`{"amount_cents":1234}`), "")
	require.NoError(t, err)
	assert.Equal(t, int64(1234), n)
	n, err = e.GuardAmount(1, "refund", []byte(`{}`), "")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "a rate counts calls")
}

// An amount that cannot be counted is an error: the ledger fails closed.
func TestGuardAmountFailsClosed(t *testing.T) {
	e := mustCompile(t, guardPolicy(`
  - {id: budget, kind: budget, tools: [refund], amount: "args.amount", limit: 1000, window: 1h}
`))
	for args, want := range map[string]string{
		`{"amount":-1}`:      "never negative",
		`{"amount":1.5}`:     "whole number",
		`{"amount":2e15}`:    "over 1000000000000000",
		`{"amount":"12"}`:    "want a number",
		`{}`:                 "no such key",
		`not json`:           "guard budget",
		`{"amount":1000000}`: "",
	} {
		_, err := e.GuardAmount(0, "refund", []byte(args), "")
		if want == "" {
			assert.NoError(t, err, args)
			continue
		}
		require.Error(t, err, args)
		assert.Contains(t, err.Error(), want, args)
	}
}

// Each mistake in a guard is named by its place.
func TestGuardsValidation(t *testing.T) {
	_, err := Parse([]byte(guardPolicy(`
  - {kind: budget, limit: 1, window: 1h}
  - {id: b, kind: budget, amount: "'x'", limit: 0, window: forever}
  - {id: b, kind: rate, amount: "1", limit: 1, window: 1h, per: team, exceed: maybe}
  - {id: d, kind: repeat, limit: 1, window: 500ms, approvers: {count: 1}}
  - {id: e, kind: spree, limit: 1, window: 1h, tools: [""]}
`)))
	require.Error(t, err)
	for _, want := range []string{
		"guards[0].id: missing",
		"guards[0].amount: missing",
		"guards[1].amount: type string, want a number",
		"guards[1].limit: 0, want from 1",
		`guards[1].window: "forever"`,
		`guards[2].id: "b" is also the id of guards[1]`,
		"guards[2].amount: only a budget has an amount",
		`guards[2].per: "team"`,
		`guards[2].exceed: "maybe", want deny or ask`,
		`guards[3].window: "500ms"`,
		"guards[3].approvers: only a guard whose exceed is ask names approvers",
		`guards[4].kind: "spree"`,
		"guards[4].tools[0]: a tool name must not be empty",
	} {
		assert.Contains(t, err.Error(), want)
	}
	p, err := Parse([]byte(guardPolicy(`
  - {id: a, kind: rate, tools: [refnud], limit: 1, window: 1h}
`)))
	require.NoError(t, err)
	err = p.CheckTools([]string{"refund", "close_ticket"})
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), `"refnud"`), err.Error())
}
