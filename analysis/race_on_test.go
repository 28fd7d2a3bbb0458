//go:build race

package analysis

// raceDetector: the tests run under the race detector, which multiplies
// the CPU time of everything they run.
const raceDetector = true
