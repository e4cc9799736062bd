package main

import (
	"bytes"
	"context"
	"flag"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// helpOf runs `toolgate help WORDS...` on a cli of its own and returns what
// it printed and the flag set the command built (nil if none stopped).
func helpOf(t *testing.T, words ...string) (string, *flag.FlagSet) {
	t.Helper()
	var out, errb bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &errb}
	if err := c.help(context.Background(), words); err != nil {
		t.Fatalf("toolgate help %s: %v\n%s", strings.Join(words, " "), err, errb.String())
	}
	if c.stopped == nil {
		t.Fatalf("toolgate help %s: no flag set stopped at --help", strings.Join(words, " "))
	}
	return out.String(), c.stopped.fs
}

// Every command of the dispatch table is in `toolgate --help`, under a
// group, with a summary; and `toolgate help NAME` gives its summary, usage,
// an example and every flag of the flag set the command itself builds.
func TestHelpCoversEveryCommand(t *testing.T) {
	grouped, _, err := runCLI("--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, {"help"}, {"-h"}} {
		if out, _, err := runCLI(args...); err != nil || out != grouped {
			t.Errorf("toolgate %v: %v, not the same help as --help:\n%s", args, err, out)
		}
	}
	lines := strings.Split(strings.TrimSuffix(grouped, "\n"), "\n")
	if len(lines) > 42 {
		t.Errorf("toolgate --help has %d lines, want at most 42", len(lines))
	}
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > 100 {
			t.Errorf("toolgate --help: a line of %d characters: %q", n, l)
		}
	}
	for _, g := range commandGroups {
		if !slices.Contains(lines, g+":") {
			t.Errorf("toolgate --help lacks the group %q", g)
		}
	}
	for _, want := range []string{"CONNECTION", "--address", "--profile", "toolgate help COMMAND", "go run ./cmd/toolgate-bench"} {
		if !strings.Contains(grouped, want) {
			t.Errorf("toolgate --help lacks %q", want)
		}
	}

	dispatch := (&cli{}).commands()
	helped := map[string]bool{} // first words with help
	for _, cmd := range commandHelp {
		first := strings.Fields(cmd.name)[0]
		if dispatch[first] == nil {
			t.Errorf("help for %q, which is no command", cmd.name)
		}
		helped[first] = true
		if !slices.ContainsFunc(lines, func(l string) bool {
			return strings.HasPrefix(l, "  "+cmd.name+" ") && strings.HasSuffix(l, "  "+cmd.summary)
		}) {
			t.Errorf("toolgate --help has no line for %q with its summary %q", cmd.name, cmd.summary)
		}
		if cmd.summary == "" || len(cmd.usage) == 0 || len(cmd.examples) == 0 {
			t.Errorf("%s: want a summary, a usage and an example, have %+v", cmd.name, cmd)
		}
	}
	for name := range dispatch {
		if !helped[name] {
			t.Errorf("command %q is not in toolgate --help", name)
		}
	}

	for _, cmd := range commandHelp {
		out, fs := helpOf(t, strings.Fields(cmd.name)...)
		if fs.Name() != "toolgate "+cmd.name {
			t.Errorf("toolgate help %s printed the flags of %q", cmd.name, fs.Name())
		}
		if !strings.HasPrefix(out, "toolgate "+cmd.name+": "+cmd.summary+"\n") {
			t.Errorf("toolgate help %s does not start with its summary:\n%s", cmd.name, out)
		}
		for _, want := range []string{"\nusage:\n  toolgate " + cmd.name, "\nexamples:\n  " + cmd.examples[0] + "\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("toolgate help %s lacks %q:\n%s", cmd.name, want, out)
			}
		}
		if !strings.Contains(out, "\n  toolgate "+cmd.name+" ") {
			t.Errorf("toolgate help %s has no example of toolgate %s:\n%s", cmd.name, cmd.name, out)
		}
		fs.VisitAll(func(f *flag.Flag) {
			if !strings.Contains(out, "\n  --"+f.Name+"\n") && !strings.Contains(out, "\n  --"+f.Name+" ") {
				t.Errorf("toolgate help %s does not list --%s", cmd.name, f.Name)
			}
		})
		for _, l := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(l); n > 100 {
				t.Errorf("toolgate help %s: a line of %d characters: %q", cmd.name, n, l)
			}
		}
		// `toolgate NAME --help` and `-h` print the same.
		for _, h := range []string{"--help", "-h"} {
			got, _, err := runCLI(append(strings.Fields(cmd.name), h)...)
			if err != nil || got != out {
				t.Errorf("toolgate %s %s: %v; not what toolgate help %s prints:\n%s", cmd.name, h, err, cmd.name, got)
			}
		}
	}
}

// `toolgate help dev` lists every flag dev takes, those its usage line
// never listed among them.
func TestHelpDevListsEveryFlag(t *testing.T) {
	out, fs := helpOf(t, "dev")
	for _, name := range []string{"inbox-tls-cert", "inbox-tls-key", "inbox-insecure", "inbox-host", "via-key", "tls-client-ca",
		"mcp-address", "mcp-tokens", "mcp-wait", "agui-address", "agui-origin", "agui-planner", "agui-tokens", "otlp-insecure", "http-api", "db", "desk-db"} {
		if fs.Lookup(name) == nil {
			t.Errorf("dev has no --%s", name)
		}
		if !strings.Contains(out, "\n  --"+name+" ") && !strings.Contains(out, "\n  --"+name+"\n") {
			t.Errorf("toolgate help dev does not list --%s", name)
		}
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if got := strings.Count(out, "\n  --"); got != n {
		t.Errorf("toolgate help dev lists %d flags; dev has %d:\n%s", got, n, out)
	}
	if !strings.Contains(out, "(default 127.0.0.1:7233)") {
		t.Errorf("toolgate help dev does not show --address's default:\n%s", out)
	}
}

// Help for a group lists its commands; help for what is no command says
// so, naming toolgate --help; a bad flag names toolgate help COMMAND.
func TestHelpGroupsAndMistakes(t *testing.T) {
	for _, args := range [][]string{{"help", "keys"}, {"keys", "--help"}, {"keys", "-h"}} {
		out, _, err := runCLI(args...)
		if err != nil {
			t.Fatalf("toolgate %v: %v", args, err)
		}
		for _, want := range []string{"keys new", "keys encryption", "keys tls", "toolgate help keys new"} {
			if !strings.Contains(out, want) {
				t.Errorf("toolgate %v lacks %q:\n%s", args, want, out)
			}
		}
	}
	if out, _, err := runCLI("help", "mcp"); err != nil || !strings.Contains(out, "mcp serve") || !strings.Contains(out, "mcp token new") {
		t.Errorf("toolgate help mcp: %v\n%s", err, out)
	}
	if out, _, err := runCLI("help", "notify"); err != nil || !strings.HasPrefix(out, "toolgate notify test: ") {
		t.Errorf("toolgate help notify: %v, want notify test's help:\n%s", err, out)
	}
	for _, args := range [][]string{{"help", "nope"}, {"help", "keys", "old"}, {"--help", "nope"}} {
		out, _, err := runCLI(args...)
		if err == nil || !strings.Contains(err.Error(), "toolgate --help") || !strings.Contains(err.Error(), "no such command") || out != "" {
			t.Errorf("toolgate %v: %v, printed %q; want an error naming toolgate --help", args, err, out)
		}
	}
	if _, _, err := runCLI("nope"); err == nil || !strings.Contains(err.Error(), "toolgate --help") {
		t.Errorf("toolgate nope: %v", err)
	}
	_, errOut, err := runCLI("dev", "--bogus")
	if err == nil || !strings.Contains(err.Error(), "-bogus") || !strings.Contains(err.Error(), "toolgate help dev") {
		t.Errorf("toolgate dev --bogus: %v, want the flag and toolgate help dev named", err)
	}
	if errOut != "" {
		t.Errorf("toolgate dev --bogus printed %q besides its error", errOut)
	}
	if _, _, err := runCLI("mcp", "serve", "--listen"); err == nil || !strings.Contains(err.Error(), "toolgate help mcp serve") {
		t.Errorf("toolgate mcp serve --listen: %v", err)
	}
}
