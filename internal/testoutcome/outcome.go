// Package testoutcome runs a test helper against a testing.TB that records
// whether the helper skipped or failed its test, and what it said, so a
// test can check a helper's skip-or-fail decision (a set-up that skips
// where it should fail lets the test that needs it pass without running).
package testoutcome

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// Outcome is how a helper ended a test: SkipMsg or FailMsg holds what it
// said, or both are empty where it did neither.
type Outcome struct {
	testing.TB
	SkipMsg, FailMsg string
}

// Helper does nothing: the recorded test is not the one that reports.
func (o *Outcome) Helper() {}

// Skip records a skip and ends the helper.
func (o *Outcome) Skip(args ...any) { o.SkipMsg = fmt.Sprint(args...); runtime.Goexit() }

// Skipf records a skip and ends the helper.
func (o *Outcome) Skipf(format string, args ...any) {
	o.SkipMsg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// Fatal records a failure and ends the helper.
func (o *Outcome) Fatal(args ...any) { o.FailMsg = fmt.Sprint(args...); runtime.Goexit() }

// Fatalf records a failure and ends the helper.
func (o *Outcome) Fatalf(format string, args ...any) {
	o.FailMsg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// Errorf records a failure; the helper goes on, as it would.
func (o *Outcome) Errorf(format string, args ...any) {
	o.FailMsg += fmt.Sprintf(format, args...)
}

// Run runs fn with a testing.TB that records a skip or a failure instead
// of ending t, and returns what it recorded; fn's cleanups are t's.
func Run(t *testing.T, fn func(testing.TB)) *Outcome {
	o := &Outcome{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(o)
	}()
	<-done
	return o
}

// Want reports on t unless the helper skipped (skip) or failed (!skip)
// saying about; what names the case in the report.
func (o *Outcome) Want(t testing.TB, skip bool, about, what string) {
	t.Helper()
	switch {
	case skip && o.SkipMsg == "":
		t.Errorf("%s: failed %q, passed %v; want a skip", what, o.FailMsg, o.FailMsg == "")
	case !skip && o.FailMsg == "":
		t.Errorf("%s: skipped %q, passed %v; want a failure", what, o.SkipMsg, o.SkipMsg == "")
	case !strings.Contains(o.SkipMsg+o.FailMsg, about):
		t.Errorf("%s: %q; want it to say %q", what, o.SkipMsg+o.FailMsg, about)
	}
}
