package kineto

import (
	"fmt"
	"strconv"
	"strings"
)

// cutEscape makes the decoder's message about a bad \u escape the same
// whatever the sizes of the reads that brought the bytes: the decoder
// quotes the escape up to its first bad byte when the read ended there,
// and all six bytes when they were all read ("\u#" or "\u#000" for one
// file). The message keeps the escape up to and including its first byte
// that is not a hex digit.
func cutEscape(msg string) string {
	const label = "invalid escape sequence "
	rest, ok := strings.CutPrefix(msg, label)
	if !ok || rest == "" {
		return msg
	}
	end := strings.IndexByte(rest[1:], rest[0])
	if end < 0 || (rest[0] != '`' && rest[0] != '"') {
		return msg
	}
	quoted, tail := rest[:end+2], rest[end+2:]
	seq, err := strconv.Unquote(quoted)
	if err != nil || !strings.HasPrefix(seq, `\u`) {
		return msg
	}
	n := 2
	for n < len(seq) && n < 6 && isHex(seq[n]) {
		n++
	}
	if n < len(seq) {
		n++ // the first byte that is not a hex digit
	}
	seq = seq[:n]
	if strconv.CanBackquote(seq) {
		return label + "`" + seq + "`" + tail
	}
	return label + fmt.Sprintf("%q", seq) + tail
}
