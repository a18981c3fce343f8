// Package progress shows what a long nexoctl command is waiting for, one line per item (a
// component, a proxy, a check). On a terminal the lines are redrawn in place by Bubble Tea, each
// waiting item behind a Bubbles spinner, a done one behind ✓ and a failed one behind ✗. Off a
// terminal (a CI log, a pipe) each change of an item is one plain line, so a log reads as a
// history; Options.Quiet writes nothing there instead.
package progress

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"
)

// Item is one thing being waited for.
type Item struct {
	// Name identifies the item (nexo-operator, shop/orders-proxy) and orders the lines.
	Name string
	// State is short: "1/1 available", "Progressing 0/2".
	State string
	// Detail says why, when there is something to say (a condition's reason and message).
	Detail string
	// Done: it reached what is waited for. Failed: waiting cannot get it there.
	Done, Failed bool
}

// line is the item as one line of text, without its mark.
func (i Item) line() string {
	s := i.Name + "  " + i.State
	if i.Detail != "" {
		s += "  (" + i.Detail + ")"
	}
	return s
}

// Options choose how a Display writes.
type Options struct {
	// Terminal: w is a terminal; redraw in place with a spinner.
	Terminal bool
	// Quiet: off a terminal, write nothing (for progress that only matters while one watches).
	Quiet bool
	// Title is written above the items (on a terminal) or before each line (off one).
	Title string
}

// Display shows the items of one wait. Set it as often as the state is read; Stop it once.
type Display struct {
	w    io.Writer
	opts Options

	mu      sync.Mutex
	printed map[string]string // off a terminal: the last line written per item
	program *tea.Program
	done    chan struct{}
}

// Start begins a display on w.
func Start(w io.Writer, opts Options) *Display {
	d := &Display{w: w, opts: opts, printed: map[string]string{}}
	if !opts.Terminal {
		return d
	}
	// No input (nexoctl reads no keys) and no signal handler: Ctrl-C reaches the command, whose
	// context ends the wait and then Stop.
	d.program = tea.NewProgram(model{spinner: spinner.New(spinner.WithSpinner(spinner.Dot)), title: opts.Title},
		tea.WithOutput(w), tea.WithInput(nil), tea.WithoutSignalHandler())
	d.done = make(chan struct{})
	go func() {
		defer close(d.done)
		_, _ = d.program.Run()
	}()
	return d
}

// Set replaces the items shown.
func (d *Display) Set(items []Item) {
	if d.program != nil {
		d.program.Send(itemsMsg(append([]Item(nil), items...)))
		return
	}
	if d.opts.Quiet {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, it := range items {
		line := mark(it, "…") + " " + it.line()
		if d.printed[it.Name] == line {
			continue
		}
		d.printed[it.Name] = line
		if d.opts.Title != "" {
			line = d.opts.Title + ": " + line
		}
		fmt.Fprintln(d.w, line)
	}
}

// Stop draws the last state without a spinner (on a terminal) and returns when it is written.
// The lines stay, so what was waited for is still on the screen after the command's answer.
func (d *Display) Stop() {
	if d.program == nil {
		return
	}
	d.program.Send(stopMsg{})
	<-d.done
}

// mark is an item's sign: ✓ done, ✗ failed, else waiting (a spinner frame on a terminal).
func mark(it Item, waiting string) string {
	switch {
	case it.Failed:
		return "✗"
	case it.Done:
		return "✓"
	}
	return waiting
}

type itemsMsg []Item

type stopMsg struct{}

// model is the Bubble Tea model of a terminal display.
type model struct {
	spinner spinner.Model
	title   string
	items   []Item
	stopped bool
}

func (m model) Init() tea.Cmd { return m.spinner.Tick }

func (m model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case itemsMsg:
		m.items = msg
		return m, nil
	case stopMsg:
		m.stopped = true
		return m, tea.Quit
	case spinner.TickMsg:
		var cmd tea.Cmd
		m.spinner, cmd = m.spinner.Update(msg)
		return m, cmd
	}
	return m, nil
}

func (m model) View() tea.View {
	var b strings.Builder
	if m.title != "" {
		b.WriteString(m.title + "\n")
	}
	frame := strings.TrimSpace(m.spinner.View())
	if m.stopped {
		frame = "…"
	}
	for _, it := range m.items {
		b.WriteString(mark(it, frame) + " " + it.line() + "\n")
	}
	return tea.NewView(b.String())
}
