//go:build race

package dvmtest

// Race is true when this binary has the race detector, so that the
// programs a test builds get it too.
const Race = true
