package policy

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	finance  = []string{"finance"}
	anyone   = Approvers{Count: 1}
	finance1 = Approvers{Roles: finance, Count: 1}
	finance2 = Approvers{Roles: finance, Count: 2}
)

func TestEvaluate(t *testing.T) {
	e := mustCompile(t, richPolicy())
	tests := []struct {
		name        string
		tool        string
		destructive bool
		args        string
		by          string
		want        Verdict
		wantErr     string // substring of Verdict.Error
	}{
		{name: "small refund allowed", tool: "refund", destructive: true, args: `{"amount_cents":3000}`,
			want: Verdict{Rule: "small-refunds", Decide: Allow}},
		{name: "boundary refund allowed", tool: "refund", destructive: true, args: `{"amount_cents":5000}`,
			want: Verdict{Rule: "small-refunds", Decide: Allow}},
		{name: "float-written int compares as int", tool: "refund", destructive: true, args: `{"amount_cents":5e3}`,
			want: Verdict{Rule: "small-refunds", Decide: Allow}},
		{name: "fractional amount compares", tool: "refund", destructive: true, args: `{"amount_cents":5000.5}`,
			want: Verdict{Decide: Ask, Need: finance1}},
		{name: "middle refund: no rule, tool approvers", tool: "refund", destructive: true, args: `{"amount_cents":9000}`,
			want: Verdict{Decide: Ask, Need: finance1}},
		{name: "large refund needs two", tool: "refund", destructive: true, args: `{"amount_cents":60000}`,
			want: Verdict{Rule: "large-refunds", Decide: Ask, Need: finance2}},
		{name: "test refund denied", tool: "refund", destructive: true, args: `{"amount_cents":9000,"reason":"test refund"}`,
			want: Verdict{Rule: "no-test-refunds", Decide: Deny}},
		{name: "other reason falls through", tool: "refund", destructive: true, args: `{"amount_cents":9000,"reason":"broken"}`,
			want: Verdict{Decide: Ask, Need: finance1}},
		{name: "non-destructive, no rule matched", tool: "refund", args: `{"amount_cents":9000}`,
			want: Verdict{Decide: Allow}},
		{name: "tool with no rules, non-destructive", tool: "search", args: `{}`,
			want: Verdict{Decide: Allow}},
		{name: "tool with no rules, destructive", tool: "search", destructive: true, args: `{}`,
			want: Verdict{Decide: Ask, Need: anyone}},
		{name: "tool approvers on no match", tool: "close_ticket", destructive: true, args: `{}`,
			want: Verdict{Decide: Ask, Need: Approvers{Roles: []string{"support"}, Count: 1}}},
		{name: "unknown tool, destructive", tool: "drop_table", destructive: true, args: `{}`,
			want: Verdict{Decide: Ask, Need: anyone}},
		{name: "unknown tool, not destructive", tool: "lookup", args: `not json`,
			want: Verdict{Decide: Allow}},
		{name: "requested_by allows", tool: "export", destructive: true, args: `{"rows":[1],"region":"us"}`, by: "alice",
			want: Verdict{Rule: "export-self", Decide: Allow,
				Shadows: []Shadow{{Rule: "export-broken-shadow", Decide: Deny, Error: "rule export-broken-shadow could not be evaluated: no such key: nope"}}}},
		{name: "shadow recorded, not enforced", tool: "export", destructive: true, args: `{"rows":[` + strings.Repeat("1,", 200) + `1],"region":"eu","nope":1}`, by: "bob",
			want: Verdict{Rule: "export-ask", Decide: Ask, Need: anyone,
				Shadows: []Shadow{{Rule: "export-shadow", Decide: Deny}, {Rule: "export-broken-shadow", Decide: Deny}}}},
		{name: "deny rule erroring fails closed: it could hold, so it denies", tool: "export", args: `{"rows":[],"nope":2}`, by: "bob",
			want:    Verdict{Rule: "export-deny-missing", Decide: Deny, FailedClosed: true},
			wantErr: "rule export-deny-missing could not be evaluated: no such key: region; failing closed to the strictest verdict a rule that could apply gives: rule export-deny-missing denies"},
		{name: "allow rule erroring: a later rule that could hold asks for a quorum", tool: "refund", args: `{"amount":1}`,
			want: Verdict{Rule: "large-refunds", Decide: Ask, Need: finance2, FailedClosed: true}, wantErr: "no such key: amount_cents"},
		{name: "ask rule erroring keeps its approvers", tool: "wire", args: `{"amount":"lots"}`,
			want: Verdict{Rule: "wire-big", Decide: Ask, Need: finance2, FailedClosed: true}, wantErr: "rule wire-big"},
		{name: "invalid args: every rule could hold, the deny denies", tool: "refund", args: `{"amount_cents":`,
			want: Verdict{Rule: "no-test-refunds", Decide: Deny, FailedClosed: true}, wantErr: "args:"},
		{name: "non-object args fail closed", tool: "refund", args: `[1]`,
			want: Verdict{Rule: "no-test-refunds", Decide: Deny, FailedClosed: true}, wantErr: "args: an array, want a JSON object"},
		{name: "trailing data fails closed", tool: "refund", args: `{"amount_cents":1} {}`,
			want: Verdict{Rule: "no-test-refunds", Decide: Deny, FailedClosed: true}, wantErr: "data after"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := e.Evaluate(tc.tool, tc.destructive, []byte(tc.args), tc.by)
			if tc.wantErr != "" {
				assert.Contains(t, got.Error, tc.wantErr)
				got.Error = ""
			}
			assert.Equal(t, tc.want, got)
			if got.Decide == Ask {
				assert.GreaterOrEqual(t, got.Need.Count, 1)
			}
		})
	}
}

func TestEvaluateExpressions(t *testing.T) {
	src := examplePolicy() + `  t:
    rules:
      - {id: big-list, when: "args.items.exists(i, i.qty > 10)", decide: deny}
      - {id: by-tool, when: "tool == 't' && requested_by.startsWith('ops-')", decide: allow}
      - {id: nested, when: "args.meta.tags.all(k, k.matches('^[a-z]+$')) && args.meta.n == 2", decide: allow}
      - {id: keys-in-order, when: "args.obj.map(k, k) == ['a', 'b', 'c', 'd']", decide: allow}
      - {id: expensive, when: "args.list.all(x, args.list.all(y, args.list.all(z, x + y + z >= 0)))", decide: allow}
`
	e := mustCompile(t, src)
	tests := []struct {
		args, by, rule string
		decide         Decide
		err            string
	}{
		{`{"items":[{"qty":1},{"qty":11}]}`, "", "big-list", Deny, ""},
		{`{"items":[]}`, "ops-bob", "by-tool", Allow, ""},
		{`{"items":[],"meta":{"tags":["a","b"],"n":2.0}}`, "bob", "nested", Allow, ""},
		{`{"items":[],"meta":{"tags":[],"n":3},"obj":{"d":1,"c":2,"b":3,"a":4}}`, "bob", "keys-in-order", Allow, ""},
		// The allow rule over its cost limit might hold or not: the strictest
		// verdict that could decide is the tool's default, ask.
		{`{"items":[],"meta":{"tags":[],"n":3},"obj":{},"list":[` + strings.Repeat("1,", 99) + `1]}`, "bob", "", Ask, "rule expensive could not be evaluated: operation cancelled: actual cost limit exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.args[:min(len(tc.args), 30)], func(t *testing.T) {
			for range 10 { // map order must not matter
				v := e.Evaluate("t", true, []byte(tc.args), tc.by)
				assert.Equal(t, tc.rule, v.Rule)
				assert.Equal(t, tc.decide, v.Decide)
				if tc.err == "" {
					assert.Empty(t, v.Error)
				} else {
					assert.Contains(t, v.Error, tc.err)
				}
			}
		})
	}
}

func TestEvaluateConcurrentAndPure(t *testing.T) {
	e := mustCompile(t, richPolicy())
	want := e.Evaluate("refund", true, []byte(`{"amount_cents":60000}`), "")
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				v := e.Evaluate("refund", true, []byte(fmt.Sprintf(`{"amount_cents":%d}`, 60000+i+j)), "")
				assert.Equal(t, want, v)
			}
		}()
	}
	wg.Wait()
	// A verdict's Need is the caller's: changing it changes nothing in the engine.
	want.Need.Roles[0] = "changed"
	assert.Equal(t, finance2, e.Evaluate("refund", true, []byte(`{"amount_cents":60000}`), "").Need)
}

func TestCompileCopiesPolicy(t *testing.T) {
	p, err := Parse([]byte(examplePolicy()))
	require.NoError(t, err)
	e, err := Compile(p)
	require.NoError(t, err)
	p.RequireSignedStart, p.MaxTokenLifetime = true, "15m"
	e2, err := Compile(p)
	require.NoError(t, err)
	assert.True(t, e2.Policy().RequireSignedStart)
	assert.Equal(t, 15*time.Minute, e2.Policy().TokenLifetime())
	p.Tools["refund"].Rules[1].Approvers.Roles[0] = "support"
	delete(p.Approvers, "bob")
	assert.Equal(t, finance2, e.Evaluate("refund", true, []byte(`{"amount_cents":60000}`), "").Need)
	assert.Contains(t, e.Policy().Approvers, "bob")

	_, err = Compile(&Policy{})
	assert.ErrorContains(t, err, "approvers")
}

// The compiled policy keeps its operators (a run checks a rewind against
// it), as a copy.
func TestCompileKeepsOperators(t *testing.T) {
	p := &Policy{Approvers: map[string]Approver{"olga": {Key: testKey(1), Roles: []string{"sre"}}}, Operators: []string{"sre"}}
	e, err := Compile(p)
	require.NoError(t, err)
	require.NoError(t, e.Policy().Operator("olga"))
	p.Operators[0] = "changed"
	assert.Equal(t, []string{"sre"}, e.Policy().Operators)
}

func TestCompileExpr(t *testing.T) {
	e := mustCompile(t, examplePolicy())
	x, err := e.CompileExpr("tool == 'refund' && args.amount_cents < 1000 && requested_by != 'mallory'")
	require.NoError(t, err)
	assert.Equal(t, "tool == 'refund' && args.amount_cents < 1000 && requested_by != 'mallory'", x.String())
	tests := []struct {
		tool, args, by string
		want           bool
		err            string
	}{
		{"refund", `{"amount_cents":999}`, "bob", true, ""},
		{"refund", `{"amount_cents":1000}`, "bob", false, ""},
		{"refund", `{"amount_cents":10}`, "mallory", false, ""},
		{"wire", `{"amount_cents":10}`, "bob", false, ""},
		{"refund", `{}`, "bob", false, "no such key: amount_cents"},
		{"refund", `"x"`, "bob", false, "want a JSON object"},
	}
	for _, tc := range tests {
		ok, err := x.Match(tc.tool, []byte(tc.args), tc.by)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err)
		} else {
			assert.NoError(t, err)
		}
		assert.Equal(t, tc.want, ok, "%s %s %s", tc.tool, tc.args, tc.by)
	}

	for src, want := range map[string]string{
		"":                        "empty expression",
		"args.amount_cents + 1":   "want bool",
		"args.amount_cents <":     "Syntax error",
		"now() > 1":               "undeclared reference",
		strings.Repeat("x", 3000): "at most 2048",
	} {
		_, err := e.CompileExpr(src)
		assert.ErrorContains(t, err, want, src)
	}

	dyn, err := e.CompileExpr("args.flag")
	require.NoError(t, err)
	ok, err := dyn.Match("t", []byte(`{"flag":true}`), "")
	assert.NoError(t, err)
	assert.True(t, ok)
	_, err = dyn.Match("t", []byte(`{"flag":"yes"}`), "")
	assert.ErrorContains(t, err, "want bool")
}

// A rule that cannot be evaluated never lowers the bar (issue 20, item 2):
// the verdict is the strictest any rule that could still decide gives.
func TestEvaluateFailsClosedToTheStrictest(t *testing.T) {
	src := examplePolicy() + `  goodwill:
    rules:
      - {id: goodwill-allow, when: "args.reason == 'goodwill'", decide: allow}
      - {id: goodwill-one, when: "args.amount_cents > 1000 && args.amount_cents <= 20000", decide: ask, approvers: {roles: [support]}}
      - {id: goodwill-two, when: "args.amount_cents > 20000", decide: ask, approvers: {roles: [finance], count: 2}}
      - {id: goodwill-huge, when: "args.amount_cents > 1000000", decide: deny}
    approvers: {roles: [finance]}
  mixed:
    rules:
      - {id: m-two, when: "args.x > 1", decide: ask, approvers: {roles: [finance], count: 2}}
      - {id: m-support, when: "args.y > 1", decide: ask, approvers: {roles: [support]}}
      - {id: m-one, when: "true", decide: ask}
  lenient:
    rules:
      - {id: lenient-a, when: "args.x == 1", decide: allow}
      - {id: lenient-b, when: "args.y == 1", decide: allow}
    approvers: {roles: [support]}
`
	e := mustCompile(t, src)
	support1 := Approvers{Roles: []string{"support"}, Count: 1}
	tests := []struct {
		name, tool, args string
		want             Verdict
	}{
		// The case: a 40,000 refund with no reason is not paid on one approval.
		{"a failed rule and a later quorum: the quorum", "goodwill", `{"amount_cents":40000}`,
			Verdict{Rule: "goodwill-two", Decide: Ask, Need: finance2, FailedClosed: true}},
		// goodwill-two surely holds: goodwill-huge (a deny) after it can never decide.
		{"the first rule that surely holds ends the candidates", "goodwill", `{"amount_cents":2000000}`,
			Verdict{Rule: "goodwill-two", Decide: Ask, Need: finance2, FailedClosed: true}},
		{"a smaller quorum that surely holds", "goodwill", `{"amount_cents":5000}`,
			Verdict{Rule: "goodwill-one", Decide: Ask, Need: support1, FailedClosed: true}},
		{"nothing holds surely: the default is a candidate", "goodwill", `{"amount_cents":500}`,
			Verdict{Decide: Ask, Need: finance1, FailedClosed: true}},
		{"a larger quorum that could hold before a smaller one that surely does", "mixed", `{}`,
			Verdict{Rule: "m-two", Decide: Ask, Need: finance2, FailedClosed: true}},
		{"of equal quorums, the earliest", "mixed", `{"x":0}`,
			Verdict{Rule: "m-support", Decide: Ask, Need: support1, FailedClosed: true}},
		{"every candidate allows: allowed, by the tool's default", "lenient", `{}`,
			Verdict{Decide: Allow, FailedClosed: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := e.Evaluate(tc.tool, tc.tool == "goodwill", []byte(tc.args), "")
			assert.Contains(t, got.Error, "could not be evaluated")
			got.Error = ""
			assert.Equal(t, tc.want, got)
		})
	}
	t.Run("a later deny that could hold denies", func(t *testing.T) {
		got := e.Evaluate("goodwill", true, []byte(`{"amount_cents":"x"}`), "")
		assert.Equal(t, Deny, got.Decide)
		assert.Equal(t, "goodwill-huge", got.Rule)
		assert.True(t, got.FailedClosed)
	})
	t.Run("no rule fails: nothing is failed closed", func(t *testing.T) {
		got := e.Evaluate("goodwill", true, []byte(`{"amount_cents":5000,"reason":"other"}`), "")
		assert.Equal(t, Verdict{Rule: "goodwill-one", Decide: Ask, Need: support1}, got)
	})
	t.Run("EvaluateFirstError is the old rule, kept for old runs", func(t *testing.T) {
		got := e.EvaluateFirstError("goodwill", true, []byte(`{"amount_cents":40000}`), "")
		assert.Equal(t, "goodwill-allow", got.Rule)
		assert.Equal(t, finance1, got.Need)
		assert.False(t, got.FailedClosed)
		assert.Contains(t, got.Error, "failing closed: ask")
	})
}
