//go:build toolgate_ci

package deploy

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// staticBinaryEnv names the binary .ci/run built with the Dockerfile's own
// build line (only the output path changed). The test command does not build
// it: .ci/run does, then runs this test:
//
//	TOOLGATE_STATIC_BINARY=PATH go test -tags toolgate_ci -run TestDockerfileBinary ./deploy
const staticBinaryEnv = "TOOLGATE_STATIC_BINARY"

// TestDockerfileBinaryIsStaticAndServesTheComposeWorker checks what the image
// relies on in the binary the Dockerfile's build line made: it is static
// (distroless/static has no libc), it starts, and its worker, dev and
// pending subcommands accept every flag docker-compose.yml passes them.
func TestDockerfileBinaryIsStaticAndServesTheComposeWorker(t *testing.T) {
	bin := os.Getenv(staticBinaryEnv)
	if bin == "" {
		t.Fatalf("%s is not set: .ci/run sets it to the binary it built with the Dockerfile's build line", staticBinaryEnv)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has a dynamic loader (PT_INTERP): it would not start on distroless/static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "toolgate") {
		t.Errorf("toolgate --help: %v\n%s", err, out)
	}

	// `SUBCOMMAND -h` prints its help, every flag of its flag set among it:
	// the worker's, the server's and the server's healthcheck's flags.
	c := loadCompose(t)
	for _, cmd := range [][]string{
		c.service(t, workerService).Command,
		c.service(t, serverService).Command,
		c.service(t, serverService).Healthcheck.Test[2:],
	} {
		help, _ := exec.CommandContext(ctx, bin, cmd[0], "-h").CombinedOutput()
		for _, flag := range commandFlags(cmd) {
			if !strings.Contains(string(help), "-"+strings.TrimPrefix(flag, "--")+" ") &&
				!strings.Contains(string(help), "-"+strings.TrimPrefix(flag, "--")+"\n") {
				t.Errorf("toolgate %s does not accept %s; its flags:\n%s", cmd[0], flag, help)
			}
		}
	}
}
