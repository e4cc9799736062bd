//go:build unix

package devserver

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
)

// A server that cannot start because another holds its address or its data
// says so with an error a caller can tell apart, which says what to do.
func TestInUseSaysWhatToDo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	_, err = Start(context.Background(), Options{DataDir: t.TempDir(), Address: ln.Addr().String()})
	if !errors.Is(err, ErrAddressInUse) {
		t.Fatalf("a busy address: %v, want ErrAddressInUse", err)
	}
	if want := "stop it, or choose another address"; !containsText(err, want) {
		t.Fatalf("a busy address: %v, want it to say %q", err, want)
	}

	dir := t.TempDir()
	unlock, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	_, err = lockDataDir(dir)
	if !errors.Is(err, ErrDataInUse) || !containsText(err, "stop that server, or give this one other data") {
		t.Fatalf("a held data dir: %v, want ErrDataInUse saying what to do", err)
	}
}

// containsText reports whether err says s.
func containsText(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }
