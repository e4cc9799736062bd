package main

import (
	"os"
	"regexp"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
)

// The search attributes `toolgate dev` registers (on SQLite or --db
// PostgreSQL) are those docker-compose.yml's namespace job creates
// (deploy/create-namespace.sh), with the same types.
func TestDevSearchAttributesAgreeWithCompose(t *testing.T) {
	script, err := os.ReadFile("../../deploy/create-namespace.sh")
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]enumspb.IndexedValueType{ // the temporal CLI's --type names
		"Keyword": enumspb.INDEXED_VALUE_TYPE_KEYWORD, "KeywordList": enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
		"Text": enumspb.INDEXED_VALUE_TYPE_TEXT, "Int": enumspb.INDEXED_VALUE_TYPE_INT,
		"Double": enumspb.INDEXED_VALUE_TYPE_DOUBLE, "Bool": enumspb.INDEXED_VALUE_TYPE_BOOL,
		"Datetime": enumspb.INDEXED_VALUE_TYPE_DATETIME,
	}
	got := map[string]enumspb.IndexedValueType{}
	for _, m := range regexp.MustCompile(`--name\s+(\S+)\s+--type\s+(\S+)`).FindAllStringSubmatch(string(script), -1) {
		typ, ok := types[m[2]]
		if !ok {
			t.Fatalf("create-namespace.sh: unknown type %q for %s", m[2], m[1])
		}
		got[m[1]] = typ
	}
	if len(got) != len(searchAttributes) {
		t.Errorf("create-namespace.sh creates %v; toolgate dev registers %v", got, searchAttributes)
	}
	for name, typ := range searchAttributes {
		if got[name] != typ {
			t.Errorf("search attribute %s: create-namespace.sh makes it %v, toolgate dev %v", name, got[name], typ)
		}
	}
}
