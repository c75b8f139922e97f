package launcher

import (
	"strings"

	"github.com/dynrt/dynrt/wire"
)

// SplitWords splits a command line such as the value of --launch-agent
// ("ssh -F ~/cfg -o 'ProxyJump=gw'") into words the way a POSIX shell
// does, without expanding anything: blanks separate words, single quotes
// keep everything literally, double quotes keep everything but a
// backslash before $ ` " \ or a newline, and a backslash outside quotes
// keeps the next character. Unterminated quotes, a trailing backslash and
// an empty result are errors (wire.ErrInvalid) that say what is wrong.
func SplitWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\\':
			if i+1 == len(rs) {
				return nil, wire.Errorf(wire.ErrInvalid, "launcher: %q: ends with a backslash that escapes nothing", s)
			}
			i++
			if rs[i] != '\n' { // backslash-newline continues the line
				w.WriteRune(rs[i])
			}
			inWord = true
		case c == '\'':
			end := indexRune(rs, i+1, '\'')
			if end < 0 {
				return nil, wire.Errorf(wire.ErrInvalid, "launcher: %q: single quote at offset %d is never closed", s, i)
			}
			w.WriteString(string(rs[i+1 : end]))
			i, inWord = end, true
		case c == '"':
			j := i + 1
			for ; j < len(rs) && rs[j] != '"'; j++ {
				if rs[j] == '\\' && j+1 < len(rs) && strings.ContainsRune("$`\"\\\n", rs[j+1]) {
					j++
				}
				w.WriteRune(rs[j])
			}
			if j == len(rs) {
				return nil, wire.Errorf(wire.ErrInvalid, "launcher: %q: double quote at offset %d is never closed", s, i)
			}
			i, inWord = j, true
		default:
			w.WriteRune(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	if len(words) == 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "launcher: empty command")
	}
	return words, nil
}

func indexRune(rs []rune, from int, r rune) int {
	for i := from; i < len(rs); i++ {
		if rs[i] == r {
			return i
		}
	}
	return -1
}

// ParseAgent reads a --launch-agent value: the ssh command and its
// options, as shell words. origin names where the value came from
// (--launch-agent or $DYNRT_SSH) for the error.
func ParseAgent(origin, v string) ([]string, error) {
	words, err := SplitWords(v)
	if err != nil {
		return nil, wire.Errorf(wire.ErrInvalid, "%s: %s; quote the ssh command and its options as for a shell, e.g. \"ssh -F 'my config'\"", origin, strings.TrimPrefix(err.Error(), "launcher: "))
	}
	return words, nil
}
