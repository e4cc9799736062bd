package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// decodeArgs decodes a call's arguments, which must be one JSON object.
// Numbers become int64 when integral and within int64, else float64; objects
// become maps that CEL iterates in key order (a Go map's order is random,
// and a workflow must replay the same way).
func decodeArgs(data []byte) (ref.Val, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("args: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("args: data after the JSON value")
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("args: %s, want a JSON object", jsonKind(v))
	}
	out, err := convert(v)
	if err != nil {
		return nil, fmt.Errorf("args: %w", err)
	}
	return out.(ref.Val), nil
}

// convert turns decoded JSON into CEL's input: numbers converted, objects
// wrapped as sortedMap, arrays as []any of converted values.
func convert(v any) (any, error) {
	switch v := v.(type) {
	case json.Number:
		return convertNumber(v)
	case map[string]any:
		keys := make([]string, 0, len(v))
		//workflowcheck:ignore (collects the keys, sorted next)
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			c, err := convert(v[k])
			if err != nil {
				return nil, fmt.Errorf("%q: %w", k, err)
			}
			v[k] = c
		}
		return sortedMap{Mapper: types.NewStringInterfaceMap(types.DefaultTypeAdapter, v), keys: keys}, nil
	case []any:
		for i, e := range v {
			c, err := convert(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			v[i] = c
		}
		return v, nil
	default:
		return v, nil
	}
}

func convertNumber(n json.Number) (any, error) {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i, nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return nil, fmt.Errorf("number %s: %w", n, err)
	}
	// An integral number written as a float (5000.0, 5e3) is an int when it
	// fits; 2^63 and beyond stay float.
	if f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 {
		return int64(f), nil
	}
	return f, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []any:
		return "an array"
	default:
		return "a number"
	}
}

// sortedMap is a JSON object as a CEL map whose iteration (exists, all,
// map, filter...) goes in key order, so that a result, an error and the
// cost spent never depend on Go's map order.
type sortedMap struct {
	traits.Mapper
	keys []string
}

// Iterator implements traits.Iterable, in key order.
func (m sortedMap) Iterator() traits.Iterator { return &keyIterator{keys: m.keys} }

type keyIterator struct {
	keys []string
	next int
}

func (it *keyIterator) HasNext() ref.Val { return types.Bool(it.next < len(it.keys)) }

func (it *keyIterator) Next() ref.Val {
	if it.next >= len(it.keys) {
		return nil
	}
	k := it.keys[it.next]
	it.next++
	return types.String(k)
}

func (*keyIterator) ConvertToNative(reflect.Type) (any, error) {
	return nil, errors.New("type conversion on iterators not supported")
}
func (*keyIterator) ConvertToType(ref.Type) ref.Val { return types.NewErr("no such overload") }
func (*keyIterator) Equal(ref.Val) ref.Val          { return types.NewErr("no such overload") }
func (*keyIterator) Type() ref.Type                 { return types.IteratorType }
func (*keyIterator) Value() any                     { return nil }
