package workflows

import (
	"encoding/json"
	"fmt"

	"github.com/toolgate/toolgate/tool"
)

// UnmarshalJSON decodes a RunInput strictly (ParseRunInput). What it refuses
// is kept and reported when the run starts, as an InvalidInput failure that
// names the field, so a bad start ends at once instead of failing to decode.
// The input is then decoded leniently, so that the run itself refuses it
// (newRun) with that failure.
func (in *RunInput) UnmarshalJSON(b []byte) error {
	parsed, err := ParseRunInput(b)
	if err != nil {
		type lenient RunInput // the same fields, without this UnmarshalJSON
		parsed = RunInput{}
		_ = json.Unmarshal(b, (*lenient)(&parsed)) // the run fails with err anyway if this fails too
	}
	*in = parsed
	in.invalid = err
	if in.RequestToken != "" && in.Carry == nil { // a signed start: what it signs
		in.inputDigest, _ = InputDigest(b) // "" (no digest) fails the token's check
	}
	return nil
}

// InputDigest is the hex SHA-256 of the canonical JSON (tool.Canonical) of a
// RunInput as JSON, its request_token left out: what a signed start signs
// (input_digest), so the token starts that input and no other.
func InputDigest(input []byte) (string, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(input, &fields); err != nil {
		return "", fmt.Errorf("RunInput: want a JSON object: %w", err)
	}
	delete(fields, "request_token")
	b, err := json.Marshal(fields)
	if err != nil {
		return "", fmt.Errorf("RunInput: %w", err)
	}
	canon, err := tool.Canonical(b)
	if err != nil {
		return "", fmt.Errorf("RunInput: %w", err)
	}
	return sha256Hex(canon), nil
}

// ParseRunInput decodes a RunInput as AgentRun does: no unknown fields, no
// duplicate keys, at most MaxInputBytes (the carry aside), and every field
// given explicitly in range (approval_timeout "0s" is refused, not taken for
// the default). Errors name the field.
func ParseRunInput(b []byte) (RunInput, error) {
	type runInput RunInput // the same fields, without this UnmarshalJSON
	var in runInput
	if err := tool.DecodeStrict(b, &in); err != nil {
		return RunInput(in), fmt.Errorf("RunInput: %w", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return RunInput(in), fmt.Errorf("RunInput: want a JSON object: %w", err)
	}
	if size := len(b) - len(fields["carry"]); size > MaxInputBytes {
		return RunInput(in), fmt.Errorf("RunInput is %d bytes: at most %d", size, MaxInputBytes)
	}
	out := RunInput(in)
	return out, out.checkFields(fields)
}

// checkFields checks the ranges of the fields a start gave explicitly. The
// input of a continued run was written by the run itself, from an input
// already checked (under the rules of its day): its values are clamped
// instead (withDefaults), so a bound lowered later cannot fail a live chain.
func (in RunInput) checkFields(fields map[string]json.RawMessage) error {
	switch {
	case in.Fork != nil && in.Carry == nil:
		return in.checkFork()
	case in.Fork != nil:
		return nil // a continued fork (or a forged carry, which the run refuses)
	}
	if err := in.checkPolicy(); err != nil {
		return err
	}
	if in.Carry != nil {
		return nil
	}
	if len(in.Goal) > MaxGoalBytes {
		return fmt.Errorf("goal is %d bytes: at most %d", len(in.Goal), MaxGoalBytes)
	}
	positive := []struct {
		name  string
		value int64
		max   int64
		unit  string
	}{
		{"approval_timeout", int64(in.ApprovalTimeout), 0, ""},
		{"idle_timeout", int64(in.IdleTimeout), 0, ""},
		{"max_turns", int64(in.MaxTurns), 0, ""},
		{"history_limit", int64(in.HistoryLimit), MaxHistoryLimit, " events"},
		{"memo_entries", int64(in.MemoEntries), MaxMemoEntries, " entries"},
		{"memo_bytes", int64(in.MemoBytes), MaxMemoBytes, " bytes"},
	}
	for _, f := range positive {
		raw, given := fields[f.name]
		switch {
		case !given:
		case f.value <= 0:
			return fmt.Errorf("%s %s: must be positive (leave it out for the default)", f.name, raw)
		case f.max > 0 && f.value > f.max:
			return fmt.Errorf("%s %s: at most %d%s", f.name, raw, f.max, f.unit)
		}
	}
	return nil
}

// checkPolicy checks the approval policy and the planner's configuration.
func (in RunInput) checkPolicy() error {
	if err := in.Planner.Validate(); err != nil {
		return err
	}
	switch in.Approval {
	case "", PolicyHuman, PolicyDeny, PolicyAlwaysApprove:
		return nil
	}
	return fmt.Errorf("approval %q is unknown: want %q, %q or %q", clip(in.Approval, MaxNameBytes), PolicyHuman, PolicyDeny, PolicyAlwaysApprove)
}
