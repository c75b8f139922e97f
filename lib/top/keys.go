package top

import "github.com/charmbracelet/bubbles/key"

// KeyMap is dyntop's key map, after htop, k9s and flux top.
type KeyMap struct {
	Next, Prev, Up, Down, Enter, Back key.Binding
	Filter, Help, Add, Sub, Pause     key.Binding
	Quit                              key.Binding
}

// DefaultKeys returns the key map. Add and Sub are disabled (and left out
// of the help) when read-only.
func DefaultKeys(readOnly bool) KeyMap {
	k := KeyMap{
		Next:   key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next pane")),
		Prev:   key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift-tab", "previous pane")),
		Up:     key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:   key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		Enter:  key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open job")),
		Back:   key.NewBinding(key.WithKeys("esc", "backspace"), key.WithHelp("esc", "back")),
		Filter: key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		Help:   key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Add:    key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "add procs")),
		Sub:    key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "remove procs")),
		Pause:  key.NewBinding(key.WithKeys("z"), key.WithHelp("z", "pause")),
		Quit:   key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
	}
	if readOnly {
		k.Add.SetEnabled(false)
		k.Sub.SetEnabled(false)
	}
	return k
}

// ShortHelp is the key line at the bottom of the screen.
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Next, k.Down, k.Enter, k.Filter, k.Add, k.Sub, k.Pause, k.Help, k.Quit}
}

// FullHelp is the help screen.
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Next, k.Prev, k.Up, k.Down},
		{k.Enter, k.Back, k.Filter},
		{k.Add, k.Sub, k.Pause, k.Help, k.Quit},
	}
}
