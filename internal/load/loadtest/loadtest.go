// Package loadtest holds what the tests of the loader and its readers
// share. Tests only: it is never linked into the binary.
package loadtest

import (
	"errors"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/snapshot"
)

// WantInputError checks that err is a *snapshot.Error on one line that
// names path and says want, and returns it.
func WantInputError(t testing.TB, err error, path, want string) *snapshot.Error {
	t.Helper()
	var e *snapshot.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *Error", err, err)
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("error has a line break: %q", msg)
	}
	if !strings.Contains(msg, path) {
		t.Errorf("error %q does not name %q", msg, path)
	}
	if !strings.Contains(msg, want) {
		t.Errorf("error %q does not contain %q", msg, want)
	}
	return e
}
