//go:build race

package workflows_test

// raceDetector: this test binary runs under the race detector, which slows
// workflow code down several times over.
const raceDetector = true
