package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// commandDoc is what a command's --help says besides its flags.
type commandDoc struct {
	synopsis string   // after "usage: rulevalidator "
	about    []string // paragraphs; one whose lines start with two spaces is shown as written
	exit     string   // the exit statuses
	examples []string // command lines
}

// commandLine is one command's command line: its own flags, registered on fs
// by the command, and the settings it reads (the table's), from which --help
// is written.
type commandLine struct {
	name      string
	doc       commandDoc
	fs        *flag.FlagSet
	set       *settings
	stderr    io.Writer
	allowArgs bool // positional arguments are the command's to read
	// args are the positional arguments, when allowed: flags may come
	// before, between and after them; "--" ends the flags.
	args []string
}

func newCommandLine(name string, doc commandDoc, set *settings, stderr io.Writer) *commandLine {
	if set == nil {
		set = &settings{}
	}
	c := &commandLine{name: name, doc: doc, fs: flag.NewFlagSet(name, flag.ContinueOnError), set: set, stderr: stderr}
	c.fs.SetOutput(stderr)
	c.fs.Usage = func() { c.usage(stderr) }
	return c
}

// parse reads args and then the settings from all their sources. When the
// command should stop it says so with ok false and the exit status: 0 for
// --help, 2 for a bad flag or setting, whose reason has been written.
func (c *commandLine) parse(args []string, getenv env) (code int, ok bool) {
	src := c.set.register(c.fs)
	for rest := args; ; {
		if err := c.fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK, false
			}
			return exitInvalid, false // the flag package has said why
		}
		if !c.allowArgs || c.fs.NArg() == 0 {
			break
		}
		if used := len(rest) - c.fs.NArg(); used > 0 && rest[used-1] == "--" {
			c.args = append(c.args, c.fs.Args()...)
			break
		}
		c.args = append(c.args, c.fs.Arg(0))
		rest = c.fs.Args()[1:]
	}
	if !c.allowArgs && c.fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "%s: unexpected arguments: %s\n", c.name, strings.Join(c.fs.Args(), " "))
		return exitInvalid, false
	}
	deprecated, err := src.resolve(c.fs, getenv, isSetting)
	for _, d := range deprecated {
		fmt.Fprintf(c.stderr, "%s: %s\n", c.name, d)
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", c.name, err)
		return exitInvalid, false
	}
	return exitOK, true
}

// invalid writes the problems found in the command's settings, one a line,
// and returns the exit status for them.
func (c *commandLine) invalid(err error) int {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(c.stderr, "%s: %s\n", c.name, line)
	}
	return exitInvalid
}

// helpWidth is the column --help wraps its text at.
const helpWidth = 80

// usage writes --help: the synopsis and description, the command's own
// flags, then its settings by section, as the table declares them.
func (c *commandLine) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: rulevalidator %s\n", c.doc.synopsis)
	for _, p := range c.doc.about {
		fmt.Fprintln(w)
		writeParagraph(w, p, "", helpWidth)
	}
	if c.doc.exit != "" {
		fmt.Fprintln(w)
		writeParagraph(w, "Exit status: "+c.doc.exit, "", helpWidth)
	}
	var own []*flag.Flag
	c.fs.VisitAll(func(f *flag.Flag) {
		if !c.isSettingFlag(f.Name) {
			own = append(own, f)
		}
	})
	if len(own) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Flags:")
		for _, f := range own {
			kind, help := flag.UnquoteUsage(f)
			if d := f.DefValue; d != "" && d != "0" && d != "false" {
				help += " (default " + d + ")"
			}
			writeFlag(w, f.Name, kind, help)
		}
	}
	if len(c.set.list) > 0 {
		fmt.Fprintln(w)
		writeParagraph(w, "Settings: each is a flag, a key of the file --"+configFlag+" FILE names (YAML or JSON, "+
			"keyed by flag name; settings of other commands in it are left to them) and, where one is named, "+
			"an environment variable; a flag wins over the environment, and the environment over the file. "+
			"A setting has the same name, variable and meaning on every command.", "", helpWidth)
		section := ""
		for _, st := range c.set.list {
			if st.section != section {
				section = st.section
				fmt.Fprintf(w, "\n%s:\n", section)
			}
			writeFlag(w, st.name, st.kind, st.describe())
			var from []string
			if st.env != "" {
				from = append(from, "env "+st.env)
			}
			if st.def != "" {
				from = append(from, "default "+st.def)
			}
			if len(from) > 0 {
				writeParagraph(w, strings.Join(from, ", "), "        ", helpWidth)
			}
		}
	}
	if len(c.doc.examples) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Example:")
		for _, e := range c.doc.examples {
			fmt.Fprintln(w, "  "+e)
		}
	}
}

// isSettingFlag says whether the flag is one of the settings, a deprecated
// spelling of one, or --config.
func (c *commandLine) isSettingFlag(name string) bool {
	if name == configFlag && len(c.set.list) > 0 {
		return true
	}
	for _, st := range c.set.list {
		if st.name == name {
			return true
		}
		for _, a := range st.aliases {
			if a == name {
				return true
			}
		}
	}
	return false
}

// writeFlag writes one flag: its name and kind of value, then its help
// indented below.
func writeFlag(w io.Writer, name, kind, help string) {
	dashes := "--"
	if len(name) == 1 {
		dashes = "-"
	}
	line := "  " + dashes + name
	if kind != "" {
		line += " " + kind
	}
	fmt.Fprintln(w, line)
	writeParagraph(w, help, "        ", helpWidth)
}

// writeParagraph writes text wrapped at width, each line after indent; a
// paragraph whose lines all start with two spaces is written as it is.
func writeParagraph(w io.Writer, text, indent string, width int) {
	lines := strings.Split(text, "\n")
	preformatted := true
	for _, l := range lines {
		if !strings.HasPrefix(l, "  ") {
			preformatted = false
		}
	}
	if preformatted {
		for _, l := range lines {
			fmt.Fprintln(w, indent+l)
		}
		return
	}
	line := indent
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > width {
			fmt.Fprintln(w, line)
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	if len(line) > len(indent) {
		fmt.Fprintln(w, line)
	}
}

// commandLogger is the log of a command run by hand (validate, eval):
// warnings and errors only, everything with -v.
func commandLogger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}
