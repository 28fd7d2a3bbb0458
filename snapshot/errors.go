package snapshot

import (
	"errors"
	"fmt"
	"strings"
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
		return OneLine(fmt.Sprintf("%s: %s at byte offset %d", p, e.Msg, e.Offset))
	}
	return OneLine(fmt.Sprintf("%s: %s", p, e.Msg))
}

// OneLine makes text from an input (quoted in an error, printed in a
// report) one inert line: line breaks and tabs become spaces, other control
// characters — C0, DEL and the C1 range, whose 0x9b starts terminal escape
// sequences — become \xNN.
func OneLine(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case isControl(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// IsInputError reports whether err is (or wraps) an *Error, i.e. bad input
// rather than a failure of torchmem or the machine.
func IsInputError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
