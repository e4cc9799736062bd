package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/toolgate/toolgate/workflows"
)

// --search-attributes is auto unless given; alone it means true.
func TestSearchAttributesFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want searchAttrsMode
	}{
		{nil, searchAttrsAuto},
		{[]string{"--search-attributes"}, searchAttrsOn},
		{[]string{"--search-attributes=true"}, searchAttrsOn},
		{[]string{"--search-attributes=false"}, searchAttrsOff},
		{[]string{"--search-attributes=0"}, searchAttrsOff},
		{[]string{"--search-attributes=auto"}, searchAttrsAuto},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		m := searchAttrsFlag(fs)
		if err := fs.Parse(c.args); err != nil || *m != c.want {
			t.Errorf("%v: %v %q, want %q", c.args, err, *m, c.want)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	searchAttrsFlag(fs)
	if err := fs.Parse([]string{"--search-attributes=maybe"}); err == nil || !strings.Contains(err.Error(), "auto, true or false") {
		t.Errorf("--search-attributes=maybe: %v", err)
	}
	// A bool flag takes no value apart: `worker --search-attributes false`
	// would mean true and an argument, which worker refuses.
	_, _, err := runCLI("worker", "--search-attributes", "false")
	if err == nil || !strings.Contains(err.Error(), `takes no arguments (got "false")`) || !strings.Contains(err.Error(), "--search-attributes=false") {
		t.Errorf("worker --search-attributes false: %v", err)
	}
}

// attrs is a ListSearchAttributes answer with these custom attributes.
func attrs(names ...string) *operatorservice.ListSearchAttributesResponse {
	resp := &operatorservice.ListSearchAttributesResponse{CustomAttributes: map[string]enumspb.IndexedValueType{},
		SystemAttributes: map[string]enumspb.IndexedValueType{"WorkflowType": enumspb.INDEXED_VALUE_TYPE_KEYWORD}}
	for _, n := range names {
		resp.CustomAttributes[n] = searchAttributes[n]
	}
	return resp
}

// What a worker does with the namespace's search attributes, by
// --search-attributes and what the namespace has.
func TestResolveSearchAttributes(t *testing.T) {
	all := attrs(workflows.SearchAttrStatus, workflows.SearchAttrPendingTools, workflows.SearchAttrForkedFrom)
	wrongType := attrs(workflows.SearchAttrStatus, workflows.SearchAttrForkedFrom)
	wrongType.CustomAttributes[workflows.SearchAttrPendingTools] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	refused := serviceerror.NewPermissionDenied("Request unauthorized.", "")
	create := "temporal operator search-attribute create --namespace agents --name ToolgateStatus --type Keyword " +
		"--name ToolgatePendingTools --type KeywordList --name ToolgateForkedFrom --type Keyword"
	for _, c := range []struct {
		name    string
		mode    searchAttrsMode
		resp    *operatorservice.ListSearchAttributesResponse
		listErr error
		want    bool
		errHas  []string // the error says these (none: no error)
		lineHas []string // stderr's one line says these (none: nothing on stderr)
	}{
		{name: "auto, all three", mode: searchAttrsAuto, resp: all, want: true},
		{name: "auto, none", mode: searchAttrsAuto, resp: attrs(),
			lineHas: []string{"namespace agents has no ToolgateStatus/ToolgatePendingTools/ToolgateForkedFrom search attributes",
				"toolgate pending and the inbox", "querying every running run of the task queue", create}},
		{name: "auto, no status", mode: searchAttrsAuto, resp: attrs(workflows.SearchAttrPendingTools),
			lineHas: []string{"has no ToolgateStatus/ToolgateForkedFrom search attributes", "--name ToolgateStatus --type Keyword --name ToolgateForkedFrom"}},
		{name: "auto, status without forked-from", mode: searchAttrsAuto, resp: attrs(workflows.SearchAttrStatus, workflows.SearchAttrPendingTools),
			errHas: []string{"has no ToolgateForkedFrom search attributes", "missing from toolgate pending and the inbox",
				"--name ToolgateForkedFrom --type Keyword", "--search-attributes=false"}},
		{name: "auto, a type of its own", mode: searchAttrsAuto, resp: wrongType,
			errHas: []string{"ToolgatePendingTools is Keyword, not KeywordList", "--search-attributes=false"}},
		{name: "auto, refused", mode: searchAttrsAuto, listErr: refused,
			lineHas: []string{"could not list namespace agents's search attributes", "Request unauthorized.", "running without them", "pass --search-attributes"}},
		{name: "true, all three", mode: searchAttrsOn, resp: all, want: true},
		{name: "true, none", mode: searchAttrsOn, resp: attrs(),
			errHas: []string{"--search-attributes: namespace agents has no ToolgateStatus/ToolgatePendingTools/ToolgateForkedFrom search attributes", create}},
		{name: "true, a type of its own", mode: searchAttrsOn, resp: wrongType, errHas: []string{"ToolgatePendingTools is Keyword, not KeywordList"}},
		{name: "true, refused", mode: searchAttrsOn, listErr: refused, want: true,
			lineHas: []string{"could not list", "keeping ToolgateStatus, ToolgatePendingTools, ToolgateForkedFrom current, as --search-attributes says"}},
		{name: "false", mode: searchAttrsOff},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			asked := false
			got, err := resolveSearchAttrs(context.Background(), c.mode, "agents", func(context.Context) (*operatorservice.ListSearchAttributesResponse, error) {
				asked = true
				return c.resp, c.listErr
			}, &stderr)
			if asked == (c.mode == searchAttrsOff) {
				t.Errorf("asked the namespace: %v", asked)
			}
			if got != c.want {
				t.Errorf("keeps them current: %v, want %v", got, c.want)
			}
			switch {
			case len(c.errHas) == 0 && err != nil:
				t.Errorf("error: %v", err)
			case len(c.errHas) > 0 && err == nil:
				t.Errorf("no error, want one saying %q", c.errHas)
			}
			for _, want := range c.errHas {
				if err != nil && !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			line := stderr.String()
			if len(c.lineHas) == 0 && line != "" {
				t.Errorf("stderr: %q", line)
			}
			if len(c.lineHas) > 0 && (strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n")) {
				t.Errorf("stderr %q: want one line", line)
			}
			for _, want := range c.lineHas {
				if !strings.Contains(line, want) {
					t.Errorf("stderr %q lacks %q", line, want)
				}
			}
		})
	}
	// A cancelled start is that, not a namespace without attributes.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := resolveSearchAttrs(ctx, searchAttrsAuto, "agents", func(ctx context.Context) (*operatorservice.ListSearchAttributesResponse, error) {
		return nil, ctx.Err()
	}, io.Discard)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
