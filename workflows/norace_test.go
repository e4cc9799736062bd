//go:build !race

package workflows_test

const raceDetector = false
