package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// BuildTimeout bounds BuildToolgate (go env and go build together).
const BuildTimeout = 10 * time.Minute

// FaultTag is the build tag that compiles fault injection into cmd/toolgate.
const FaultTag = "toolgate_fault"

// BuildToolgate builds ./cmd/toolgate of the module the current directory is
// in (its root found with `go env GOMOD`) into dir, and returns the binary's
// path. The binary is built with -ldflags="-s -w" (no symbol tables or DWARF:
// smaller, and it links faster) and with -tags toolgate_fault, which compiles
// in the fault injection the end-to-end suite uses
// (TOOLGATE_FAULT_CRASH_AFTER_COMMIT, cmd/toolgate/fault.go) and that the
// shipped binary lacks. On failure the error includes go build's output.
func BuildToolgate(dir string) (path string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("go env GOMOD: not inside a module")
	}
	bin := filepath.Join(dir, "toolgate")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", FaultTag, "-ldflags=-s -w", "-o", bin, "./cmd/toolgate")
	cmd.Dir = filepath.Dir(gomod)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/toolgate: %w\n%s", err, buf.Bytes())
	}
	return bin, nil
}
