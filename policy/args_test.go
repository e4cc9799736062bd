package policy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestConvertNumber(t *testing.T) {
	tests := []struct {
		in   string
		want any
		err  bool
	}{
		{"5000", int64(5000), false},
		{"-7", int64(-7), false},
		{"5e3", int64(5000), false},
		{"5000.0", int64(5000), false},
		{"5000.5", 5000.5, false},
		{"9223372036854775807", int64(9223372036854775807), false},
		{"9223372036854775808", 9223372036854775808.0, false},
		{"1e400", nil, true},
	}
	for _, tc := range tests {
		got, err := convertNumber(json.Number(tc.in))
		if tc.err {
			assert.Error(t, err, tc.in)
			continue
		}
		assert.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
}

func TestArgsTypesInCEL(t *testing.T) {
	e := mustCompile(t, examplePolicy())
	tests := []struct {
		expr, args string
		want       bool
		err        string
	}{
		{"type(args.n) == int && args.n + 1 == 3", `{"n":2}`, true, ""},
		{"type(args.n) == double", `{"n":2.5}`, true, ""},
		{"type(args.list[0].n) == int", `{"list":[{"n":1}]}`, true, ""},
		{"args.s == null", `{"s":null}`, true, ""},
		{"args.n > 1", `{"n":1e400}`, false, "args: \"n\": number 1e400"},
		{"args.list[0].n > 1", `{"list":[{"n":-1e400}]}`, false, "args: \"list\": [0]: \"n\""},
	}
	for _, tc := range tests {
		x, err := e.CompileExpr(tc.expr)
		if !assert.NoError(t, err) {
			continue
		}
		got, err := x.Match("t", []byte(tc.args), "")
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err)
		} else {
			assert.NoError(t, err, tc.expr)
		}
		assert.Equal(t, tc.want, got, tc.expr)
	}
}
