package tool

import (
	"encoding/json"
	"testing"
)

type exactInner struct {
	ID string `json:"id"`
}

type exactBase struct {
	CallID string `json:"call_id"`
	Note   string `json:"note,omitempty"`
}

type exactOuter struct {
	Run string `json:"run"`
	exactBase
	Items []exactInner          `json:"items,omitempty"`
	ByKey map[string]exactInner `json:"by_key,omitempty"`
	Raw   json.RawMessage       `json:"raw,omitempty"`
	Plain string
}

// DecodeStrict lets a key in another case fill a field (encoding/json folds
// case); DecodeExact refuses it at any depth, and names key and field.
// Keys inside a json.RawMessage are the value's own and are left alone.
func TestDecodeExactRefusesCaseVariantKeys(t *testing.T) {
	for _, raw := range []string{
		`{"CALL_ID":"c-3"}`,
		`{"call_id":"c-3","Call_Id":"c-4"}`,
		`{"Run":"r"}`,
		`{"items":[{"ID":"x"}]}`,
		`{"by_key":{"a":{"Id":"x"}}}`,
		`{"plain":"x"}`,
		"{\"call_\u0131d\":\"c-3\"}", // dotless i: not a case variant encoding/json takes
		"{\"\u212aey\":1}",           // Kelvin sign: not a field
	} {
		var lenient exactOuter
		strictErr := DecodeStrict([]byte(raw), &lenient)
		var v exactOuter
		err := DecodeExact([]byte(raw), &v)
		if err == nil {
			t.Errorf("DecodeExact(%s) took it: %+v", raw, v)
			continue
		}
		t.Logf("%s: DecodeStrict: %v; DecodeExact: %v", raw, strictErr, err)
	}
	var v exactOuter
	if err := DecodeExact([]byte(`{"CALL_ID":"c-3"}`), &v); err == nil || err.Error() != `key "CALL_ID": the field is "call_id" (keys are matched exactly, case included)` {
		t.Errorf("the error names the key and the field: %v", err)
	}
	if err := DecodeExact([]byte(`{"items":[{"ID":"x"}]}`), &v); err == nil || err.Error() != `key "ID" (at items[0]): the field is "id" (keys are matched exactly, case included)` {
		t.Errorf("the error says where: %v", err)
	}
	var ok exactOuter
	good := `{"run":"r","call_id":"c-3","note":"n","items":[{"id":"x"}],"by_key":{"K":{"id":"y"}},"raw":{"ANY":{"Case":1}},"Plain":"p"}`
	if err := DecodeExact([]byte(good), &ok); err != nil {
		t.Fatalf("exact keys refused: %v", err)
	}
	if ok.CallID != "c-3" || ok.Items[0].ID != "x" || ok.ByKey["K"].ID != "y" || ok.Plain != "p" {
		t.Errorf("decoded %+v", ok)
	}
	if err := DecodeExact([]byte(`{"call_id":"a","call_id":"b"}`), &ok); err == nil {
		t.Error("a key given twice is refused too (DecodeStrict)")
	}
}
