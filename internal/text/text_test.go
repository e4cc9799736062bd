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
