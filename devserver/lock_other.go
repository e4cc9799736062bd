//go:build !unix

package devserver

// lockDataDir only guards against a second Server in this process on
// platforms without flock (the in-process check is done by Start).
func lockDataDir(string) (unlock func(), err error) {
	return func() {}, nil
}
