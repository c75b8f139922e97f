package top

import (
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/lipgloss"
)

// palette colours jobs by job number (ANSI 256 colours that read on dark
// and light backgrounds).
var palette = []lipgloss.Color{"39", "208", "70", "170", "220", "33", "160", "43", "99", "130", "201", "112"}

// letters name jobs in the slot map, by job number.
const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Styles are the looks of the screen, all built on one renderer so that
// the colour profile is fixed by the caller (NO_COLOR, tests).
type Styles struct {
	r        *lipgloss.Renderer
	Title    lipgloss.Style
	Pane     lipgloss.Style // pane title
	Focus    lipgloss.Style // focused pane title
	Dim      lipgloss.Style
	Bold     lipgloss.Style
	Selected lipgloss.Style
	Warn     lipgloss.Style
	Bad      lipgloss.Style
	Good     lipgloss.Style
	Free     lipgloss.Style
	jobs     []lipgloss.Style // cell style per palette entry
	jobsFg   []lipgloss.Style
}

// NewStyles builds the styles on r (lipgloss.DefaultRenderer() when nil).
func NewStyles(r *lipgloss.Renderer) Styles {
	if r == nil {
		r = lipgloss.DefaultRenderer()
	}
	s := Styles{
		r:        r,
		Title:    r.NewStyle().Bold(true),
		Pane:     r.NewStyle().Foreground(lipgloss.Color("244")),
		Focus:    r.NewStyle().Bold(true).Foreground(lipgloss.Color("39")),
		Dim:      r.NewStyle().Foreground(lipgloss.Color("242")),
		Bold:     r.NewStyle().Bold(true),
		Selected: r.NewStyle().Reverse(true),
		Warn:     r.NewStyle().Foreground(lipgloss.Color("214")),
		Bad:      r.NewStyle().Foreground(lipgloss.Color("196")).Bold(true),
		Good:     r.NewStyle().Foreground(lipgloss.Color("70")),
		Free:     r.NewStyle().Foreground(lipgloss.Color("238")),
	}
	for _, c := range palette {
		s.jobs = append(s.jobs, r.NewStyle().Background(c).Foreground(lipgloss.Color("16")))
		s.jobsFg = append(s.jobsFg, r.NewStyle().Foreground(c).Bold(true))
	}
	return s
}

// Job returns the cell style of job number id.
func (s Styles) Job(id uint32) lipgloss.Style { return s.jobs[int(id)%len(s.jobs)] }

// JobFg returns the text style of job number id.
func (s Styles) JobFg(id uint32) lipgloss.Style { return s.jobsFg[int(id)%len(s.jobsFg)] }

// JobLetter names job number id in the slot map.
func JobLetter(id uint32) byte {
	if id == 0 {
		return '?'
	}
	return letters[int(id-1)%len(letters)]
}

// Help returns help styles on the same renderer.
func (s Styles) Help() help.Styles {
	return help.Styles{
		Ellipsis:       s.Dim,
		ShortKey:       s.Bold,
		ShortDesc:      s.Dim,
		ShortSeparator: s.Dim,
		FullKey:        s.Bold,
		FullDesc:       s.Dim,
		FullSeparator:  s.Dim,
	}
}
