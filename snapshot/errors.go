package snapshot

import (
	"errors"
	"fmt"

	"github.com/torchmem/torchmem/internal/units"
)

// Error is a problem with an input file: which file, what is wrong, and the
// byte offset where it was found (−1 when not known). Its message is one line.
type Error struct {
	Path   string
	Offset int64
	Msg    string
}

// Error formats "PATH: MSG at byte offset N".
func (e *Error) Error() string {
	p := e.Path
	if p == "" {
		p = "<input>"
	}
	if e.Offset >= 0 {
		return units.OneLine(fmt.Sprintf("%s: %s at byte offset %d", p, e.Msg, e.Offset))
	}
	return units.OneLine(fmt.Sprintf("%s: %s", p, e.Msg))
}

// IsInputError reports whether err is (or wraps) an *Error, i.e. bad input
// rather than a failure of torchmem or the machine.
func IsInputError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// errTooLarge is what the input's limit reader returns past the limit; a
// reader that meets it reports the input as too large.
var ErrInputTooLarge = errors.New("input too large")
