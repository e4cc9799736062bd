//go:build unix

package devserver

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/toolgate/toolgate/internal/private"
)

// lockDataDir takes an exclusive advisory lock on DataDir/temporal.lock, so
// that a second server (in this or another process) cannot open the same
// database while this one runs. The lock goes away with the process.
func lockDataDir(dir string) (unlock func(), err error) {
	path := dir + string(os.PathSeparator) + lockFileName
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := private.Restrict(path); err != nil { // one left 0644 by an older toolgate
		_ = f.Close()
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %s is in use by another Temporal dev server (lock %s is held): %w", dir, path, ErrDataInUse)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
