package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"

	"github.com/toolgate/toolgate/workflows"
)

// searchAttrsMode is --search-attributes: auto (the default: keep toolgate's
// search attributes current if the namespace has them), true (it must have
// them) or false. Alone, --search-attributes means true.
type searchAttrsMode string

const (
	searchAttrsAuto searchAttrsMode = "auto"
	searchAttrsOn   searchAttrsMode = "true"
	searchAttrsOff  searchAttrsMode = "false"
)

func (m *searchAttrsMode) String() string { return string(*m) }

func (m *searchAttrsMode) Set(v string) error {
	if v == string(searchAttrsAuto) {
		*m = searchAttrsAuto
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("want auto, true or false")
	}
	*m = searchAttrsOff
	if b {
		*m = searchAttrsOn
	}
	return nil
}

// IsBoolFlag lets --search-attributes stand alone, meaning true.
func (m *searchAttrsMode) IsBoolFlag() bool { return true }

// searchAttrsFlag adds --search-attributes, auto unless given.
func searchAttrsFlag(fs *flag.FlagSet) *searchAttrsMode {
	m := searchAttrsAuto
	fs.Var(&m, "search-attributes", "keep ToolgateStatus (Keyword), ToolgatePendingTools (KeywordList) and ToolgateForkedFrom "+
		"(Keyword) current on every run: toolgate pending and the inbox find waiting runs by them. "+
		"auto: if the namespace has all three; true (--search-attributes alone): it must have them, or the worker does not start; false: never")
	return &m
}

// searchAttrNames are the search attributes a worker keeps current, in the
// order messages name them (types: searchAttributes).
var searchAttrNames = []string{workflows.SearchAttrStatus, workflows.SearchAttrPendingTools, workflows.SearchAttrForkedFrom}

// listSearchAttributes asks the namespace for its search attributes.
type listSearchAttributes func(context.Context) (*operatorservice.ListSearchAttributesResponse, error)

// searchAttrsTimeout bounds asking the namespace for its search attributes.
const searchAttrsTimeout = 10 * time.Second

// resolveSearchAttrs says whether a worker's runs keep toolgate's search
// attributes current under mode, asking the namespace ns (list) unless mode
// is false, and saying on stderr, in one line, why not when auto finds them
// missing or cannot ask. It fails when true finds one missing or of another
// type, and when auto does while ToolgateStatus is registered: the listings
// look waiting runs up by it, so runs that do not keep it current would be
// missing from them, and runs that keep all three current would fail their
// upserts.
func resolveSearchAttrs(ctx context.Context, mode searchAttrsMode, ns string, list listSearchAttributes, stderr io.Writer) (bool, error) {
	if mode == searchAttrsOff {
		return false, nil
	}
	lctx, cancel := context.WithTimeout(ctx, searchAttrsTimeout)
	defer cancel()
	resp, err := list(lctx)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if mode == searchAttrsOn {
			fmt.Fprintf(stderr, "toolgate: could not list namespace %s's search attributes (%s): keeping %s current, as --search-attributes says\n",
				oneLine(ns), oneLine(err.Error()), strings.Join(searchAttrNames, ", "))
			return true, nil
		}
		fmt.Fprintf(stderr, "toolgate: could not list namespace %s's search attributes (%s): running without them; "+
			"if it has %s, pass --search-attributes\n", oneLine(ns), oneLine(err.Error()), strings.Join(searchAttrNames, ", "))
		return false, nil
	}
	var missing, wrong []string
	for _, name := range searchAttrNames {
		want := searchAttributes[name]
		have, ok := resp.GetCustomAttributes()[name]
		if !ok {
			have, ok = resp.GetSystemAttributes()[name]
		}
		switch {
		case !ok:
			missing = append(missing, name)
		case have != want:
			wrong = append(wrong, fmt.Sprintf("%s is %s, not %s", name, typeName(have), typeName(want)))
		}
	}
	if len(missing) == 0 && len(wrong) == 0 {
		return true, nil
	}
	create := createCommand(ns, missing)
	if mode == searchAttrsOn {
		return false, fmt.Errorf("--search-attributes: namespace %s %s: %s; or pass --search-attributes=false",
			oneLine(ns), problems(missing, wrong), fixes(create, wrong))
	}
	if _, ok := resp.GetCustomAttributes()[workflows.SearchAttrStatus]; ok {
		return false, fmt.Errorf("namespace %s %s: this worker's runs could not keep them current, and without them "+
			"they would be missing from toolgate pending and the inbox, which look waiting runs up by %s: %s; "+
			"or pass --search-attributes=false to run without them anyway",
			oneLine(ns), problems(missing, wrong), workflows.SearchAttrStatus, fixes(create, wrong))
	}
	// Without ToolgateStatus, listing falls back to every running run.
	fmt.Fprintf(stderr, "toolgate: namespace %s %s: this worker keeps none current, so toolgate pending and the inbox "+
		"list its waiting runs by querying every running run of the task queue, slower (%s)\n",
		oneLine(ns), problems(missing, wrong), fixes(create, wrong))
	return false, nil
}

// problems says what is wrong with the namespace's search attributes.
func problems(missing, wrong []string) string {
	var p []string
	if len(missing) > 0 {
		p = append(p, "has no "+strings.Join(missing, "/")+" search attributes")
	}
	if len(wrong) > 0 {
		p = append(p, "has "+strings.Join(wrong, ", "))
	}
	return strings.Join(p, " and ")
}

// fixes says how to fix it.
func fixes(create string, wrong []string) string {
	var f []string
	if create != "" {
		f = append(f, "add them: "+create)
	}
	if len(wrong) > 0 {
		f = append(f, "re-create those of another type with the type named")
	}
	return strings.Join(f, "; ")
}

// createCommand is the temporal CLI command that adds names to namespace ns
// (as deploy/create-namespace.sh does); "" for none.
func createCommand(ns string, names []string) string {
	if len(names) == 0 {
		return ""
	}
	cmd := "temporal operator search-attribute create --namespace " + oneLine(ns)
	for _, name := range names {
		cmd += " --name " + name + " --type " + typeName(searchAttributes[name])
	}
	return cmd
}

// typeName is t as the temporal CLI's --type names it (Keyword, KeywordList).
func typeName(t enumspb.IndexedValueType) string {
	switch t {
	case enumspb.INDEXED_VALUE_TYPE_KEYWORD:
		return "Keyword"
	case enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST:
		return "KeywordList"
	}
	return strings.TrimPrefix(t.String(), "INDEXED_VALUE_TYPE_")
}
