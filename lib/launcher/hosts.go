package launcher

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/wire"
)

// MaxSlots bounds one node's slot count: a typo like slots=80000000 should
// fail here rather than size tables later.
const MaxSlots = 1 << 16

// VirtualNodes returns k nodes of s slots named node0..node<k-1>: the
// virtual nodes of `dynrun dvm start --nodes K --slots S`.
func VirtualNodes(k, s int) ([]alloc.Node, error) {
	if k < 1 {
		return nil, wire.Errorf(wire.ErrInvalid, "launcher: --nodes must be at least 1, got %d", k)
	}
	if s < 1 || s > MaxSlots {
		return nil, wire.Errorf(wire.ErrInvalid, "launcher: --slots must be between 1 and %d, got %d", MaxSlots, s)
	}
	nodes := make([]alloc.Node, k)
	for i := range nodes {
		nodes[i] = alloc.Node{Name: "node" + strconv.Itoa(i), Slots: s}
	}
	return nodes, nil
}

// ParseHosts parses the value of --host: comma-separated `host[:slots]`
// entries. A host without a count gets defSlots (1 if defSlots < 1).
func ParseHosts(s string, defSlots int) ([]alloc.Node, error) {
	var l hostList
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, wire.Errorf(wire.ErrInvalid, "launcher: --host %q: entry %d is empty", s, i+1)
		}
		name, slots, err := splitHostCount(item, defSlots)
		if err != nil {
			return nil, wire.Errorf(wire.ErrInvalid, "launcher: --host entry %q: %w", item, err)
		}
		if err := l.add(name, slots); err != nil {
			return nil, wire.Errorf(wire.ErrInvalid, "launcher: --host: %w", err)
		}
	}
	return l.nodes, nil
}

// ReadHostfile parses the hostfile at path.
func ReadHostfile(path string, defSlots int) ([]alloc.Node, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, wire.Errorf(wire.ErrNotFound, "launcher: hostfile: %w", err)
	}
	defer f.Close()
	return ParseHostfile(path, f, defSlots)
}

// ParseHostfile parses a hostfile read from r; name is used in errors
// (`name:line: ...`). An empty hostfile (only comments) is an error.
func ParseHostfile(name string, r io.Reader, defSlots int) ([]alloc.Node, error) {
	var l hostList
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		host, slots, err := parseHostLine(fields, defSlots)
		if err != nil {
			return nil, wire.Errorf(wire.ErrInvalid, "launcher: %s:%d: %w", name, line, err)
		}
		if err := l.add(host, slots); err != nil {
			return nil, wire.Errorf(wire.ErrInvalid, "launcher: %s:%d: %w", name, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, wire.Errorf(wire.ErrInvalid, "launcher: %s:%d: %w", name, line+1, err)
	}
	if len(l.nodes) == 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "launcher: %s: no hosts in hostfile", name)
	}
	return l.nodes, nil
}

// parseHostLine reads `host`, `host:N` or `host slots=N` (the only
// attribute accepted; Open MPI's max_slots and friends are refused rather
// than silently ignored).
func parseHostLine(fields []string, defSlots int) (string, int, error) {
	host, slots, err := splitHostCount(fields[0], defSlots)
	if err != nil {
		return "", 0, err
	}
	counted := strings.Contains(fields[0], ":")
	for _, attr := range fields[1:] {
		key, val, ok := strings.Cut(attr, "=")
		if !ok || key != "slots" {
			return "", 0, fmt.Errorf("unsupported attribute %q (want slots=N)", attr)
		}
		if counted {
			return "", 0, fmt.Errorf("%q: slots given twice", fields[0])
		}
		counted = true
		if slots, err = parseSlots(val); err != nil {
			return "", 0, err
		}
	}
	return host, slots, nil
}

// splitHostCount splits `host[:N]`.
func splitHostCount(item string, defSlots int) (string, int, error) {
	host, count, hasCount := strings.Cut(item, ":")
	if err := CheckHost(host); err != nil {
		return "", 0, err
	}
	if !hasCount {
		return host, max(defSlots, 1), nil
	}
	slots, err := parseSlots(count)
	return host, slots, err
}

func parseSlots(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxSlots {
		return 0, fmt.Errorf("slot count %q is not a number between 1 and %d", s, MaxSlots)
	}
	return n, nil
}

// CheckHost accepts DNS names and IPv4 addresses, the host names of host
// lists and of nodes that join a running DVM. Anything else could be taken
// by ssh for an option or by the remote shell for syntax.
func CheckHost(h string) error {
	if h == "" {
		return fmt.Errorf("empty host name")
	}
	if h[0] == '-' {
		return fmt.Errorf("host name %q starts with '-'", h)
	}
	for _, c := range h {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '_':
		default:
			return fmt.Errorf("host name %q: character %q not allowed", h, c)
		}
	}
	return nil
}

// hostList keeps hosts in first-seen order and sums repeated ones.
type hostList struct {
	nodes []alloc.Node
	index map[string]int
}

func (l *hostList) add(host string, slots int) error {
	if l.index == nil {
		l.index = make(map[string]int)
	}
	i, ok := l.index[host]
	if !ok {
		l.index[host] = len(l.nodes)
		l.nodes = append(l.nodes, alloc.Node{Name: host, Slots: slots})
		return nil
	}
	if sum := l.nodes[i].Slots + slots; sum <= MaxSlots {
		l.nodes[i].Slots = sum
		return nil
	}
	return fmt.Errorf("host %q: slots add up to more than %d", host, MaxSlots)
}
