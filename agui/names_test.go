package agui

import (
	"strings"
	"testing"
)

// A metadata.approver that does not read as it is written, or that looks
// like a name the run or a door writes (look-alike letters, another case,
// the withdrawal's (caller)), is refused with 400 saying why, and nothing
// reaches the run; an honest name with accents is taken.
func TestALookAlikeApproverNameIsRefused(t *testing.T) {
	f, h, first := twoWaiting(t, nil)
	its := interruptsOfFinish(t, last(first))
	msgs := snapshotMessages(t, first)
	answer := func(approver string) map[string]any {
		return input("t1", msgs, resolved(its[0]["id"], map[string]any{"approved": true}, map[string]any{"approver": approver}),
			resolved(its[1]["id"], map[string]any{"approved": true}, map[string]any{"approver": "alice"}))
	}
	for name, want := range map[string]string{
		"ｒule:x":            "U+FF52 'ｒ' at byte 0 is changed by NFKC normalization",
		"гrant:bob":         `the word "гrant" mixes scripts`,
		"ru\u200ble:x":      "U+200B (zero-width space)",
		" alice":            "starts with a space",
		"ruIe:x":            "names starting with (or looking like) rule:, grant:, policy:, elicitation:, webhook:, slack: are reserved",
		"роІісу:x":          "are reserved",
		"Elicitation:alice": "are reserved",
		"(caller)":          "(caller) is who the run records for a call its caller withdrew",
	} {
		rec := post(t, h, answer(name))
		if body := rec.Body.String(); rec.Code != 400 || !strings.Contains(body, "metadata.approver") || !strings.Contains(body, want) {
			t.Errorf("metadata.approver %q: %d %q, want 400 saying %q", name, rec.Code, body, want)
		}
	}
	if len(f.decisions) != 0 {
		t.Fatalf("a refused resume reached the run: %+v", f.decisions)
	}
	events(t, post(t, h, answer("José")))
	if len(f.decisions) != 2 || f.decisions[0].in.Approver != "José" {
		t.Fatalf("decisions %+v, want José's and alice's", f.decisions)
	}
}
