package text

import "testing"

func TestCutNeverSplitsARune(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"}, {"abc", 2, "ab"}, {"abé", 3, "ab"}, {"abé", 4, "abé"}, {"é", 1, ""}, {"abc", -1, ""},
	} {
		if got := Cut(c.s, c.n); got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 approvals", 1: "1 approval", 2: "2 approvals"} {
		if got := Count(n, "approval"); got != want {
			t.Errorf("Count(%d, approval) = %q, want %q", n, got, want)
		}
	}
	if got := Count(3, "reply"); got != "3 replies" {
		t.Errorf("Count(3, reply) = %q", got)
	}
	if got := Count(2, "key"); got != "2 keys" {
		t.Errorf("Count(2, key) = %q", got)
	}
}
