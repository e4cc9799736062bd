package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxStrictInput bounds what DecodeStrict reads (Temporal's own payload limit
// is 2 MiB by default).
const maxStrictInput = 4 << 20

// DecodeStrict decodes one JSON value into v and refuses what a lenient
// decoder lets through: a field v does not have (a typo such as
// "args_digset" must not silently drop the field it meant), a key given twice
// at any depth (which of the two counts would otherwise depend on the
// decoder), invalid UTF-8, anything after the value, and input over 4 MiB.
// The error names the field or key.
func DecodeStrict(raw []byte, v any) error {
	c, err := canonicalizeUpTo(raw, maxStrictInput)
	if err != nil {
		return err
	}
	c.release()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("field %s: want %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}
