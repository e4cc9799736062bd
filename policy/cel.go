package policy

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/env"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
)

// Limits on expressions.
const (
	MaxExprSize = 2 << 10 // bytes of a when expression
	CostLimit   = 100_000 // CEL cost units one evaluation may spend
)

// celEnv is the one CEL environment of every rule and grant: the variables
// args (the call's JSON object), requested_by and tool, and the standard
// library less the time-zone overloads (they read the host's tz database,
// which a replay on another host may not share).
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	var noTZ []*env.Function
	for _, f := range []struct{ name, id string }{
		{overloads.TimeGetFullYear, overloads.TimestampToYearWithTz},
		{overloads.TimeGetMonth, overloads.TimestampToMonthWithTz},
		{overloads.TimeGetDayOfYear, overloads.TimestampToDayOfYearWithTz},
		{overloads.TimeGetDayOfMonth, overloads.TimestampToDayOfMonthZeroBasedWithTz},
		{overloads.TimeGetDate, overloads.TimestampToDayOfMonthOneBasedWithTz},
		{overloads.TimeGetDayOfWeek, overloads.TimestampToDayOfWeekWithTz},
		{overloads.TimeGetHours, overloads.TimestampToHoursWithTz},
		{overloads.TimeGetMinutes, overloads.TimestampToMinutesWithTz},
		{overloads.TimeGetSeconds, overloads.TimestampToSecondsWithTz},
		{overloads.TimeGetMilliseconds, overloads.TimestampToMillisecondsWithTz},
	} {
		noTZ = append(noTZ, env.NewFunction(f.name, &env.Overload{ID: f.id}))
	}
	subset := env.NewLibrarySubset().AddExcludedFunctions(noTZ...)
	return cel.NewCustomEnv(
		cel.StdLib(cel.StdLibSubset(subset)),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(MaxExprSize),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("requested_by", cel.StringType),
		cel.Variable("tool", cel.StringType),
	)
})

// compileCEL compiles a condition; its type must be bool (or dyn, checked
// when it runs).
func compileCEL(src string) (cel.Program, error) {
	return compileTyped(src, "bool", cel.BoolType, cel.DynType)
}

// compileTyped compiles an expression within MaxExprSize whose type is one
// of types (want names them in the error), with the cost limit.
func compileTyped(src, want string, types ...*cel.Type) (cel.Program, error) {
	if src == "" {
		return nil, errors.New("empty expression")
	}
	if len(src) > MaxExprSize {
		return nil, fmt.Errorf("%d bytes, at most %d", len(src), MaxExprSize)
	}
	e, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	ast, iss := e.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, iss.Err()
	}
	if t := ast.OutputType(); !slices.ContainsFunc(types, t.IsExactType) {
		return nil, fmt.Errorf("type %s, want %s", cel.FormatCELType(t), want)
	}
	prg, err := e.Program(ast, cel.CostLimit(CostLimit))
	if err != nil {
		return nil, err
	}
	return prg, nil
}

// activation holds one call's variables, args decoded once for every rule.
type activation map[string]any

func newActivation(tool string, args []byte, requestedBy string) (activation, error) {
	a, err := decodeArgs(args)
	if err != nil {
		return nil, err
	}
	return activation{"args": a, "requested_by": requestedBy, "tool": tool}, nil
}

// evalCEL runs a compiled condition.
func evalCEL(prg cel.Program, act activation) (bool, error) {
	out, _, err := prg.Eval(map[string]any(act))
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the expression is of type %s, want bool", out.Type().TypeName())
	}
	return bool(b), nil
}
