package top

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// fit makes s exactly w cells wide: cut with an ellipsis, or padded.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	sw := ansi.StringWidth(s)
	if sw > w {
		return ansi.Truncate(s, w, "…")
	}
	return s + strings.Repeat(" ", w-sw)
}

// block makes lines exactly rows lines of w cells.
func block(lines []string, rows, w int) []string {
	out := make([]string, rows)
	for i := range rows {
		if i < len(lines) {
			out[i] = fit(lines[i], w)
		} else {
			out[i] = strings.Repeat(" ", w)
		}
	}
	return out
}

// beside joins two blocks of equal height with a separator.
func beside(a, b []string, sep string) []string {
	out := make([]string, max(len(a), len(b)))
	for i := range out {
		var l, r string
		if i < len(a) {
			l = a[i]
		}
		if i < len(b) {
			r = b[i]
		}
		out[i] = l + sep + r
	}
	return out
}

// uptime renders a duration like 1h02m03s, 4m05s or 12s.
func uptime(d time.Duration) string {
	d = d.Truncate(time.Second)
	h, mi, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case h > 0:
		return fmt.Sprintf("%dh%02dm%02ds", h, mi, s)
	case mi > 0:
		return fmt.Sprintf("%dm%02ds", mi, s)
	}
	return fmt.Sprintf("%ds", s)
}

// span renders a step time compactly: 0.25ms, 12ms, 1.25s, 2m05s.
func span(d time.Duration) string {
	switch {
	case d < 0:
		return "-"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return uptime(d)
}

// bar draws used/total as [████░░░░] of width w (inside the brackets).
func bar(used, total, w int) string {
	if w < 1 {
		return ""
	}
	n := 0
	if total > 0 {
		n = (used*w + total - 1) / total // round up: one busy slot shows
		n = min(n, w)
	}
	return "[" + strings.Repeat("█", n) + strings.Repeat("░", w-n) + "]"
}

func clock(t time.Time) string {
	if t.IsZero() {
		return "--:--:--"
	}
	return t.Format("15:04:05")
}
