package top

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/dynrt/dynrt/wire"
)

// Pane is one of the selectable parts of the screen.
type Pane int

// The panes, in tab order.
const (
	PaneJobs Pane = iota
	PanePsets
	PaneRCs
	PaneEvents
	numPanes
)

func (p Pane) String() string { return [...]string{"jobs", "psets", "changes", "events"}[p] }

// maxQueued bounds the updates held back while paused; past it the pause
// ends by itself, so that nothing is dropped.
const maxQueued = 100_000

// Config is what the model needs from its host.
type Config struct {
	// Renderer fixes the colour profile (termenv.Ascii for plain output
	// and tests); nil = lipgloss's default renderer.
	Renderer *lipgloss.Renderer
	ReadOnly bool           // no add/sub
	Wait     bool           // when the DVM stops, say so and wait instead of quitting
	Now      time.Time      // the clock until the first TickMsg
	Location *time.Location // time zone of the clock and event times; nil = time.Local
	// Request makes an add/sub request and reports with an RCResultMsg;
	// nil means this DVM cannot take requests from dyntop.
	Request func(wire.RCRequest) tea.Cmd
	// Tick returns the command producing the next TickMsg; nil = no clock.
	Tick func() tea.Cmd
}

type inputMode int

const (
	modeNone inputMode = iota
	modeFilter
	modeCount   // typing how many processes to add or remove
	modeConfirm // y/N
)

// Model is dyntop's bubbletea model.
type Model struct {
	cfg    Config
	st     *State
	styles Styles
	keys   KeyMap
	help   help.Model
	input  textinput.Model

	w, h int
	now  time.Time

	upBase time.Duration // master's uptime at upAt
	upAt   time.Time

	focus    Pane
	selJob   string // namespace of the selected job
	psetSel  int
	rcSel    int
	logBack  int // lines scrolled back in the event log
	detail   bool
	showHelp bool

	mode    inputMode
	filter  string
	reqType string // wire.RCAdd or RCSub while prompting
	reqN    uint32
	reqJob  string

	status    string
	statusBad bool

	paused bool
	queue  []tea.Msg

	lost *LostMsg
}

// New returns a model with an empty state.
func New(cfg Config) *Model {
	st := NewStyles(cfg.Renderer)
	ti := textinput.New()
	ti.Prompt = ""
	ti.PromptStyle, ti.TextStyle, ti.PlaceholderStyle = st.Bold, st.Bold, st.Dim
	ti.Cursor.Style = st.Selected
	ti.Cursor.TextStyle = st.Bold
	ti.Cursor.SetMode(cursor.CursorStatic)
	h := help.New()
	h.Styles = st.Help()
	return &Model{
		cfg: cfg, st: NewState(), styles: st, keys: DefaultKeys(cfg.ReadOnly), help: h, input: ti,
		w: 80, h: 24, now: cfg.Now, upAt: cfg.Now,
	}
}

// State exposes the model's data (for tests and --once).
func (m *Model) State() *State { return m.st }

// Init starts the clock.
func (m *Model) Init() tea.Cmd {
	if m.cfg.Tick != nil {
		return m.cfg.Tick()
	}
	return nil
}

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.w, m.h = max(msg.Width, 20), max(msg.Height, 8)
		m.help.Width = m.w
		return m, nil
	case TickMsg:
		if t := time.Time(msg); t.After(m.now) {
			m.now = t
		}
		if m.cfg.Tick != nil {
			return m, m.cfg.Tick()
		}
		return m, nil
	case SnapshotMsg, EventsMsg, JobMsg, PsetsMsg, SlotsMsg:
		if m.paused {
			m.queue = append(m.queue, msg)
			if len(m.queue) >= maxQueued {
				m.resume()
				m.setStatus("pause ended: too many updates were waiting", true)
			}
			return m, nil
		}
		m.apply(msg)
		return m, nil
	case LostMsg:
		m.resume()
		m.lost = &msg
		if !m.cfg.Wait {
			return m, tea.Quit
		}
		return m, nil
	case ReconnectedMsg:
		m.lost = nil
		m.setStatus("attached to DVM "+msg.ID, false)
		return m, nil
	case RCResultMsg:
		if msg.Err != nil {
			m.setStatus("request failed: "+msg.Err.Error(), true)
		} else {
			m.st.ApplyRC(msg.RC)
			verb := "add"
			if msg.RC.Type == wire.RCSub {
				verb = "remove"
			}
			m.setStatus(fmt.Sprintf("%s: %s %d process(es) of %s: %s", shortDelta(msg.RC.Delta), verb, msg.RC.N, jobLabel(m.st, msg.RC.Job), msg.RC.Status), false)
		}
		return m, nil
	case tea.KeyMsg:
		return m.key(msg)
	}
	return m, nil
}

func (m *Model) apply(msg tea.Msg) {
	switch msg := msg.(type) {
	case SnapshotMsg:
		m.st.ApplySnapshot(Snapshot(msg))
		m.upBase, m.upAt = time.Duration(msg.State.Uptime), msg.At
		if msg.At.After(m.now) {
			m.now = msg.At
		}
	case EventsMsg:
		for _, ev := range msg {
			m.st.ApplyEvent(ev)
		}
	case JobMsg:
		m.st.ApplyJob(wire.JobInfo(msg))
	case PsetsMsg:
		m.st.ApplyPsets(msg.Job, msg.Sets)
	case SlotsMsg:
		m.st.ApplySlots(msg)
	}
}

// resume ends a pause, applying what was held back in order.
func (m *Model) resume() {
	m.paused = false
	for _, q := range m.queue {
		m.apply(q)
	}
	m.queue = nil
}

func (m *Model) setStatus(s string, bad bool) { m.status, m.statusBad = s, bad }

func (m *Model) key(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	switch m.mode {
	case modeFilter, modeCount:
		return m.inputKey(k)
	case modeConfirm:
		m.mode = modeNone
		if s := k.String(); s == "y" || s == "Y" {
			req := wire.RCRequest{Job: m.reqJob, Type: m.reqType, N: m.reqN, Requester: wire.ByTool, RequesterID: "dyntop"}
			m.setStatus(fmt.Sprintf("requesting %s of %d process(es) for %s…", strings.ToLower(m.reqType), m.reqN, jobLabel(m.st, m.reqJob)), false)
			return m, m.cfg.Request(req)
		}
		m.setStatus("cancelled", false)
		return m, nil
	}
	if m.showHelp {
		m.showHelp = false
		if key.Matches(k, m.keys.Quit) {
			return m, tea.Quit
		}
		return m, nil
	}
	switch {
	case key.Matches(k, m.keys.Quit):
		return m, tea.Quit
	case key.Matches(k, m.keys.Help):
		m.showHelp = true
	case key.Matches(k, m.keys.Pause):
		if m.paused {
			m.resume()
			m.setStatus("", false)
		} else {
			m.paused = true
		}
	case key.Matches(k, m.keys.Next):
		m.focus = (m.focus + 1) % numPanes
	case key.Matches(k, m.keys.Prev):
		m.focus = (m.focus + numPanes - 1) % numPanes
	case key.Matches(k, m.keys.Up):
		m.move(-1)
	case key.Matches(k, m.keys.Down):
		m.move(1)
	case key.Matches(k, m.keys.Enter):
		if m.detail {
			m.detail = false
		} else if m.selected() != nil {
			m.detail = true
		}
	case key.Matches(k, m.keys.Back):
		m.detail = false
		m.setStatus("", false)
	case key.Matches(k, m.keys.Filter):
		m.mode = modeFilter
		m.input.Placeholder = "text in job names and events"
		m.input.SetValue(m.filter)
		m.input.CursorEnd()
		return m, m.input.Focus()
	case k.String() == "a" || k.String() == "s":
		return m.startRequest(k.String())
	}
	return m, nil
}

func (m *Model) startRequest(which string) (tea.Model, tea.Cmd) {
	if m.cfg.ReadOnly {
		m.setStatus("read-only: dyntop was started with --readonly", true)
		return m, nil
	}
	if m.cfg.Request == nil {
		m.setStatus("resource changes cannot be requested from this dyntop", true)
		return m, nil
	}
	if m.lost != nil {
		m.setStatus("not attached to a DVM", true)
		return m, nil
	}
	j := m.selected()
	if j == nil || !j.Live() {
		m.setStatus("select a running job first", true)
		return m, nil
	}
	m.reqJob = j.Info.Job
	m.reqType = wire.RCAdd
	m.input.Placeholder = "number of processes"
	if which == "s" {
		m.reqType = wire.RCSub
	}
	m.mode = modeCount
	m.input.SetValue("1")
	m.input.CursorEnd()
	return m, m.input.Focus()
}

func (m *Model) inputKey(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	switch k.Type {
	case tea.KeyEsc:
		if m.mode == modeFilter {
			m.filter = ""
		}
		m.mode = modeNone
		m.input.Blur()
		return m, nil
	case tea.KeyEnter:
		v := strings.TrimSpace(m.input.Value())
		m.input.Blur()
		if m.mode == modeFilter {
			m.filter = v
			m.mode = modeNone
			return m, nil
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			m.mode = modeNone
			m.setStatus(fmt.Sprintf("%q is not a positive number of processes", v), true)
			return m, nil
		}
		m.reqN = uint32(n)
		m.mode = modeConfirm
		return m, nil
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(k)
	return m, cmd
}

// visibleJobs are the jobs of the table: live ones first, then ended,
// each by job number, narrowed by the filter.
func (m *Model) visibleJobs() []*Job {
	out := make([]*Job, 0, len(m.st.Jobs))
	for _, live := range []bool{true, false} {
		for _, j := range m.st.Jobs {
			if j.Live() == live && m.matches(j.Info.App+" "+j.Info.Job+" "+strings.Join(j.Info.Argv, " ")) {
				out = append(out, j)
			}
		}
	}
	return out
}

func (m *Model) matches(s string) bool {
	return m.filter == "" || strings.Contains(strings.ToLower(s), strings.ToLower(m.filter))
}

// selected returns the selected job: the one chosen, else the first shown.
func (m *Model) selected() *Job {
	js := m.visibleJobs()
	if i := slices.IndexFunc(js, func(j *Job) bool { return j.Info.Job == m.selJob }); i >= 0 {
		return js[i]
	}
	if len(js) > 0 {
		return js[0]
	}
	return nil
}

func (m *Model) move(d int) {
	switch m.focus {
	case PaneJobs:
		js := m.visibleJobs()
		if len(js) == 0 {
			return
		}
		i := slices.Index(js, m.selected()) // the first job when none was chosen
		i = min(max(i+d, 0), len(js)-1)
		if js[i].Info.Job != m.selJob {
			m.psetSel = 0
		}
		m.selJob = js[i].Info.Job
	case PanePsets:
		n := 0
		if j := m.selected(); j != nil {
			n = len(j.Psets)
		}
		m.psetSel = min(max(m.psetSel+d, 0), max(n-1, 0))
	case PaneRCs:
		n := 0
		if j := m.selected(); j != nil {
			n = len(m.st.RCs)
		}
		m.rcSel = min(max(m.rcSel+d, 0), max(n-1, 0))
	case PaneEvents:
		m.logBack = min(max(m.logBack-d, 0), max(len(m.st.Log)-1, 0))
	}
}

func jobLabel(st *State, ns string) string {
	if j := st.Job(ns); j != nil && j.Info.App != "" {
		return j.Info.App + " (" + ns + ")"
	}
	return ns
}

// Lost returns why the connection ended, or nil while attached.
func (m *Model) Lost() *LostMsg { return m.lost }
