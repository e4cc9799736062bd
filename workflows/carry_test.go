package workflows

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fill sets every field it can reach to a value that is not the zero value:
// a slice gets one element, a pointer a value, a struct every field.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // json.RawMessage
			v.SetBytes([]byte(`"x"`))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	}
}

// Every field of a run's carried state survives a continue-as-new: the next
// run takes it up (restore) and hands it on (carryOver) unchanged. A field
// added to Carry that either side forgets fails here.
func TestCarryRoundTrip(t *testing.T) {
	var c Carry
	fill(reflect.ValueOf(&c).Elem())
	for i, f := range reflect.VisibleFields(reflect.TypeFor[Carry]()) {
		require.False(t, reflect.ValueOf(c).Field(i).IsZero(), "fill left %s zero", f.Name)
	}
	r := &run{in: withDefaults(RunInput{})}
	r.restore(c)
	got := r.carryOver(r.in)
	want, err := json.Marshal(c)
	require.NoError(t, err)
	have, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(have))
}
