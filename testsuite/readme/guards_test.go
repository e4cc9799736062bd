package readme

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
)

// guardsBlock is a yaml block of a page that starts with guards:.
var guardsBlock = regexp.MustCompile("(?s)```yaml\n(guards:\n.*?)```")

// Every `guards:` example a page shows is a valid part of a policy: it
// parses and compiles next to one approver and the tools it names.
func TestGuardsExamplesValidate(t *testing.T) {
	root := moduleRoot(t)
	pub, _, err := signed.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	head := fmt.Sprintf("approvers:\n  alice: {key: %q}\ntools:\n  refund: {}\n", signed.FormatPublicKey(pub))
	n := 0
	for _, page := range pagesOf(t, root) {
		src, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range guardsBlock.FindAllSubmatch(src, -1) {
			n++
			p, err := policy.Parse(append([]byte(head), m[1]...))
			if err == nil {
				_, err = policy.Compile(p)
			}
			if err != nil {
				t.Errorf("%s: a guards: example does not validate: %v\n%s", page, err, m[1])
			} else if len(p.Guards) == 0 {
				t.Errorf("%s: a guards: example declares no guard:\n%s", page, m[1])
			}
		}
	}
	if n == 0 {
		t.Fatal("no page shows a guards: example; the README's did")
	}
}
