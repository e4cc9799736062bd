package tool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
)

// The marker's bytes are fixed: runs keep them in their histories.
func TestClipResultMarker(t *testing.T) {
	small := json.RawMessage(`{"ok":true}`)
	assert.Equal(t, small, ClipResult(small, len(small)), "a value within the bound is kept as it is")

	big := json.RawMessage(`"` + strings.Repeat("é", 10000) + `"`)
	sum := sha256.Sum256(big)
	head := string(big[:511]) // 512 would split an é: the head ends on a rune boundary
	want := fmt.Sprintf(`{"truncated":{"bytes":%d,"sha256":"%s","head":%q}}`, len(big), hex.EncodeToString(sum[:]), head)
	got := ClipResult(big, MaxResultBytes)
	assert.Equal(t, want, string(got))
	var m map[string]Truncated
	require.NoError(t, json.Unmarshal(got, &m))
	assert.Equal(t, len(big), m["truncated"].Bytes)
}

func TestSpecValidateBoundsDescriptionAndSchema(t *testing.T) {
	require.NoError(t, Spec{Name: "t", Description: strings.Repeat("d", MaxDescriptionBytes)}.Validate())
	err := Spec{Name: "t", Description: strings.Repeat("d", MaxDescriptionBytes+1)}.Validate()
	require.ErrorContains(t, err, fmt.Sprintf("tool t: its description has %d bytes, more than the %d", MaxDescriptionBytes+1, MaxDescriptionBytes))

	schema := func(n int) json.RawMessage {
		pad := n - len(`{"description":""}`)
		return json.RawMessage(`{"description":"` + strings.Repeat("s", pad) + `"}`)
	}
	require.NoError(t, Tool{Spec: Spec{Name: "t", Schema: schema(MaxSchemaBytes)}}.Validate())
	err = Tool{Spec: Spec{Name: "t", Schema: schema(MaxSchemaBytes + 1)}}.Validate()
	require.ErrorContains(t, err, fmt.Sprintf("tool t: its schema has %d bytes, more than the %d", MaxSchemaBytes+1, MaxSchemaBytes))

	err = Spec{Name: strings.Repeat("é", 1<<20)}.Validate()
	require.ErrorContains(t, err, "must start with a letter")
	assert.Less(t, len(err.Error()), 400, "a refused name is quoted cut")
}

func TestBoundErrorKeepsSmallErrorsAndCutsLargeOnes(t *testing.T) {
	assert.NoError(t, BoundError(nil))
	small := Failure(Permanent(errors.New("order 7 is already shipped")), 2)
	assert.Same(t, small, BoundError(small), "an error within the bound is reported as it is")

	huge := strings.Repeat("x", 3<<20)
	for name, tc := range map[string]struct {
		err          error
		typ          string
		nonRetryable bool
	}{
		"permanent": {Failure(Permanent(fmt.Errorf("s__t: %w", errors.New(huge))), 2), TypeToolFailure, true},
		"retryable": {Failure(errors.New(huge), 2), TypeToolError, false},
		"interrupt": {Failure(Interrupt(huge), 2), TypeInterrupt, true},
		"plain":     {fmt.Errorf("wrapped: %w", errors.New(huge)), "wrapError", false},
	} {
		t.Run(name, func(t *testing.T) {
			require.Greater(t, errorBytes(tc.err), 3<<20)
			got := BoundError(tc.err)
			assert.LessOrEqual(t, errorBytes(got), MaxErrorBytes+200)
			var ae *temporal.ApplicationError
			require.True(t, errors.As(got, &ae))
			assert.Equal(t, tc.typ, ae.Type())
			assert.Equal(t, tc.nonRetryable, ae.NonRetryable())
			assert.Contains(t, ae.Message(), "…[truncated: ")
			if name == "plain" {
				assert.False(t, ae.HasDetails())
				return
			}
			var d ErrorDetails
			require.NoError(t, ae.Details(&d))
			assert.Equal(t, int32(2), d.Attempt)
			assert.Contains(t, d.Message, "xxxx…[truncated: ")
			assert.LessOrEqual(t, len(d.Message), MaxErrorBytes/2)
		})
	}

	delayed := temporal.NewApplicationErrorWithOptions(huge, "Busy", temporal.ApplicationErrorOptions{NextRetryDelay: time.Minute,
		Category: temporal.ApplicationErrorCategoryBenign})
	var ae *temporal.ApplicationError
	require.True(t, errors.As(BoundError(delayed), &ae))
	assert.Equal(t, time.Minute, ae.NextRetryDelay())
	assert.Equal(t, temporal.ApplicationErrorCategoryBenign, ae.Category())
}

func TestBoundedActivity(t *testing.T) {
	var result json.RawMessage
	var fail error
	run := Bounded(func(context.Context, Request) (Response, error) { return Response{Result: result, Attempt: 3}, fail })

	result = json.RawMessage(`"` + strings.Repeat("r", 3<<20) + `"`)
	resp, err := run(context.Background(), Request{})
	require.NoError(t, err, "a result too big is a success, cut")
	assert.Equal(t, ClipResult(result, MaxResultBytes), resp.Result)
	assert.Equal(t, int32(3), resp.Attempt)

	result = json.RawMessage(`"fine"`)
	resp, err = run(context.Background(), Request{})
	require.NoError(t, err)
	assert.Equal(t, `"fine"`, string(resp.Result))

	fail = Failure(Permanent(errors.New(strings.Repeat("e", 3<<20))), 1)
	_, err = run(context.Background(), Request{})
	assert.LessOrEqual(t, errorBytes(err), MaxErrorBytes+200)
	var ae *temporal.ApplicationError
	require.True(t, errors.As(err, &ae))
	assert.Equal(t, TypeToolFailure, ae.Type())
	assert.True(t, ae.NonRetryable())
}
