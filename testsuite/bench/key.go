package bench

import (
	"encoding/json"
	"io"
	"runtime"
	"time"

	"github.com/toolgate/toolgate/tool"
)

// KeyArgs are the arguments whose key is measured: the same as
// BenchmarkCanonical in tool/key_test.go (keys out of order, a nested object,
// an array).
const KeyArgs = `{"query":"login","limit":5,"filters":{"status":["open","pending"],"priority":2}}`

// Cost is one micro-benchmark's figures.
type Cost struct {
	NsPerOp     float64
	AllocsPerOp int64
	BytesPerOp  int64
}

// KeyCost compares tool.Key with json.Marshal of the same arguments (and with
// the naive way to a sorted form: json.Unmarshal into any, then json.Marshal).
type KeyCost struct {
	Key, Marshal, RoundTrip []Cost
}

// The three operations compared. Each returns its result so that nothing is
// optimised away.

var keyRaw = json.RawMessage(KeyArgs)

// KeyOp builds the memo key (tool name, "::", canonical JSON) from the raw
// arguments as a planner sends them.
func KeyOp() (string, error) { return tool.Key(Echo, keyRaw) }

var keyDecoded = func() map[string]any {
	var v map[string]any
	if err := json.Unmarshal(keyRaw, &v); err != nil {
		panic(err)
	}
	return v
}()

// MarshalOp is json.Marshal of the same arguments already decoded into a map
// (encoding/json sorts map keys): the baseline.
func MarshalOp() ([]byte, error) { return json.Marshal(keyDecoded) }

// RoundTripOp decodes the raw arguments and encodes them again: what a key
// built on encoding/json would cost at least (and it is not canonical: it
// leaves HTML escapes and some number forms alone).
func RoundTripOp() ([]byte, error) {
	var v any
	if err := json.Unmarshal(keyRaw, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// MeasureKey measures the three operations `rounds` times each, interleaved.
func MeasureKey(rounds int, minTime time.Duration, log io.Writer) KeyCost {
	var k KeyCost
	key := func() error { _, err := KeyOp(); return err }
	marshal := func() error { _, err := MarshalOp(); return err }
	roundTrip := func() error { _, err := RoundTripOp(); return err }
	for r := 0; r < rounds; r++ {
		k.Key = append(k.Key, measureOp(key, minTime))
		k.Marshal = append(k.Marshal, measureOp(marshal, minTime))
		k.RoundTrip = append(k.RoundTrip, measureOp(roundTrip, minTime))
		logf(log, "key round %d/%d: tool.Key %.0f ns/op, json.Marshal %.0f ns/op, unmarshal+marshal %.0f ns/op",
			r+1, rounds, k.Key[r].NsPerOp, k.Marshal[r].NsPerOp, k.RoundTrip[r].NsPerOp)
	}
	return k
}

// measureOp runs op in growing batches until one batch takes minTime, the way
// `go test -bench` does, and reports that batch's time and allocations per op.
func measureOp(op func() error, minTime time.Duration) Cost {
	for n := 100; ; n *= 4 {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		for range n {
			if err := op(); err != nil {
				panic(err)
			}
		}
		d := time.Since(start)
		runtime.ReadMemStats(&after)
		if d >= minTime || n >= 1<<30 {
			return Cost{
				NsPerOp:     float64(d.Nanoseconds()) / float64(n),
				AllocsPerOp: int64(after.Mallocs-before.Mallocs) / int64(n),
				BytesPerOp:  int64(after.TotalAlloc-before.TotalAlloc) / int64(n),
			}
		}
	}
}

// MedianCost is the median of each figure.
func MedianCost(cs []Cost) Cost {
	var ns []float64
	var allocs, bytes []int64
	for _, c := range cs {
		ns, allocs, bytes = append(ns, c.NsPerOp), append(allocs, c.AllocsPerOp), append(bytes, c.BytesPerOp)
	}
	return Cost{NsPerOp: Median(ns), AllocsPerOp: Median(allocs), BytesPerOp: Median(bytes)}
}
