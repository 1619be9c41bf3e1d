package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// setting is one configuration value a command reads. Values come, lowest
// precedence first, from the default, the config file (key name), the
// environment (env) and the command line (--name). A setting read by several
// commands is declared once (table.go), so that it has the same name,
// variable, default and help on each.
type setting struct {
	name    string // flag name and config-file key
	env     string // environment variable; empty for none
	def     string // default, as text
	help    string
	section string // the heading it is listed under in --help
	kind    string // what the value is, for --help; empty for a boolean
	secret  bool   // a credential
	// aliases are deprecated flag spellings, still accepted with a warning
	// where removing them would break what the documentation said.
	aliases []string
	// profiled: a model profile may change its default (--model-profile).
	profiled bool
	apply    func(value string) error
}

// describe is the setting's help with what every command says of it besides.
func (st *setting) describe() string {
	text := st.help
	if st.secret {
		text += "; better given by the environment or --config than by a flag, which ps shows"
	}
	for _, a := range st.aliases {
		text += "; --" + a + " is a deprecated spelling of it"
	}
	if st.profiled {
		text += "; a model profile may change its default (--model-profile)"
	}
	return text
}

// settings is the configuration surface of one command, in the order --help
// lists it.
type settings struct {
	list    []setting
	current string // section of the settings added next
	// late are the steps that set defaults from other settings' values (the
	// model profile from --model), run in order once every source is applied.
	late []func(*resolved) error
}

// lateDefaults adds a step that sets defaults from the resolved settings.
func (s *settings) lateDefaults(step func(*resolved) error) { s.late = append(s.late, step) }

// profiled marks the settings named as ones a model profile may give a default.
func (s *settings) profiled(names []string) {
	for _, name := range names {
		for i := range s.list {
			if s.list[i].name == name {
				s.list[i].profiled = true
			}
		}
	}
}

// section starts the heading the next settings are listed under.
func (s *settings) section(name string) { s.current = name }

func (s *settings) add(name, env, def, kind, help string, apply func(string) error) {
	s.list = append(s.list, setting{name: name, env: env, def: def, help: help, section: s.current, kind: kind, apply: apply})
}

// deprecated gives the setting added last an old flag spelling.
func (s *settings) deprecated(alias string) {
	s.list[len(s.list)-1].aliases = append(s.list[len(s.list)-1].aliases, alias)
}

func (s *settings) str(p *string, name, env, def, help string) {
	s.add(name, env, def, "string", help, func(v string) error { *p = v; return nil })
}

func (s *settings) secret(p *string, name, env, help string) {
	s.str(p, name, env, "", help)
	s.list[len(s.list)-1].secret = true
}

func (s *settings) strList(p *[]string, name, env, def, help string) {
	s.add(name, env, def, "list", help, func(v string) error { *p = splitList(v); return nil })
}

func (s *settings) integer(p *int, name, env, def, help string) {
	s.add(name, env, def, "int", help, func(v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		*p = n
		return nil
	})
}

func (s *settings) number(p *float64, name, env, def, help string) {
	s.add(name, env, def, "number", help, func(v string) error {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%q is not a number", v)
		}
		*p = f
		return nil
	})
}

func (s *settings) duration(p *time.Duration, name, env, def, help string) {
	s.add(name, env, def, "duration", help, func(v string) error {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not a duration (like 500ms, 30s, 5m)", v)
		}
		*p = d
		return nil
	})
}

func (s *settings) boolean(p *bool, name, env, def, help string) {
	s.add(name, env, def, "", help, func(v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		*p = b
		return nil
	})
}

// textFlag holds a flag's raw text until the settings are applied in order.
type textFlag struct {
	value  string
	isBool bool
}

func (f *textFlag) String() string     { return f.value }
func (f *textFlag) Set(v string) error { f.value = v; return nil }
func (f *textFlag) IsBoolFlag() bool   { return f.isBool }

// configFlag is the flag naming the config file, on every command with settings.
const configFlag = "config"

// sources is where a command's settings are read from once its flags are
// parsed: register adds the flags, resolve applies every source in order.
type sources struct {
	set    *settings
	byFlag map[string]*setting // names and deprecated spellings
	raw    map[string]*textFlag
	config *string
	text   map[string]string // by setting name, the value last applied
	given  map[string]bool   // by setting name: the file, the environment or a flag gave it
}

// apply gives st the value, as its default or as given by the user.
func (src *sources) apply(st *setting, value string, given bool) error {
	if err := st.apply(value); err != nil {
		return err
	}
	src.text[st.name] = value
	if given {
		src.given[st.name] = true
	}
	return nil
}

// resolved is the settings as their sources left them, for a step that sets
// defaults from them.
type resolved struct{ src *sources }

// value is the setting's value as text: as given, else its default.
func (r *resolved) value(name string) string { return r.src.text[name] }

// setDefault makes value the setting's default. A setting the user gave keeps
// their value: applied is false.
func (r *resolved) setDefault(name, value string) (applied bool, err error) {
	st, ok := r.src.byFlag[name]
	if !ok || st.name != name {
		return false, fmt.Errorf("no setting --%s", name)
	}
	if r.src.given[name] {
		return false, nil
	}
	if err := r.src.apply(st, value, false); err != nil {
		return false, fmt.Errorf("--%s: %w", name, err)
	}
	return true, nil
}

// register adds every setting, its deprecated spellings and --config to fs.
func (s *settings) register(fs *flag.FlagSet) *sources {
	src := &sources{set: s, byFlag: map[string]*setting{}, raw: map[string]*textFlag{}, text: map[string]string{}, given: map[string]bool{}}
	if len(s.list) == 0 {
		return src
	}
	for i := range s.list {
		st := &s.list[i]
		raw := &textFlag{value: st.def, isBool: st.kind == ""}
		for _, name := range append([]string{st.name}, st.aliases...) {
			src.byFlag[name], src.raw[name] = st, raw
			fs.Var(raw, name, st.describe())
		}
	}
	src.config = fs.String(configFlag, "", "a YAML or JSON file of settings, keyed by their flag names")
	return src
}

// resolve applies the defaults, then the config file named by --config, then
// the environment, then the flags fs was given, and last the steps that set
// defaults from those (late), where a value given by any source wins. Config
// keys that are settings of other commands (known) are left to them, so that
// one file can serve every command; any other key is refused. Every error names the setting and
// where its value came from. It returns the deprecated spellings used.
func (src *sources) resolve(fs *flag.FlagSet, getenv env, known func(name string) bool) (deprecated []string, err error) {
	for i := range src.set.list {
		st := &src.set.list[i]
		if err := src.apply(st, st.def, false); err != nil {
			return nil, fmt.Errorf("default of --%s: %w", st.name, err)
		}
	}
	if src.config != nil && *src.config != "" {
		values, err := readConfigFile(*src.config)
		if err != nil {
			return nil, err
		}
		for _, key := range sortedKeys(values) {
			st, ok := src.byFlag[key]
			switch {
			case ok && st.name == key:
				if err := src.apply(st, values[key], true); err != nil {
					return nil, fmt.Errorf("%s: %s: %w", *src.config, key, err)
				}
			case known(key):
			default:
				return nil, fmt.Errorf("%s: unknown setting %q", *src.config, key)
			}
		}
	}
	for i := range src.set.list {
		st := &src.set.list[i]
		if st.env == "" {
			continue
		}
		if v, ok := lookup(getenv, st.env); ok {
			if err := src.apply(st, v, true); err != nil {
				return nil, fmt.Errorf("environment %s: %w", st.env, err)
			}
		}
	}
	fs.Visit(func(f *flag.Flag) {
		st, ok := src.byFlag[f.Name]
		if !ok || err != nil {
			return
		}
		if f.Name != st.name {
			deprecated = append(deprecated, fmt.Sprintf("--%s is deprecated: use --%s", f.Name, st.name))
		}
		if e := src.apply(st, src.raw[f.Name].value, true); e != nil {
			err = fmt.Errorf("--%s: %w", f.Name, e)
		}
	})
	if err != nil {
		return deprecated, err
	}
	for _, step := range src.set.late {
		if err := step(&resolved{src: src}); err != nil {
			return deprecated, err
		}
	}
	return deprecated, nil
}

// lookup reads an environment variable; an empty value counts as unset.
func lookup(getenv env, key string) (string, bool) {
	v := getenv(key)
	return v, v != ""
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// readConfigFile reads a flat map of setting names to values.
func readConfigFile(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		switch v := v.(type) {
		case string:
			out[k] = v
		case []any:
			parts := make([]string, len(v))
			for i, p := range v {
				parts[i] = fmt.Sprint(p)
			}
			out[k] = strings.Join(parts, ",")
		case map[string]any:
			return nil, fmt.Errorf("%s: %s: a single value or a list is expected, not a mapping", path, k)
		case nil:
			out[k] = ""
		default:
			data, _ := json.Marshal(v)
			out[k] = strings.Trim(string(data), `"`)
		}
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// durationText writes a default duration as a person would (10m, not 10m0s), for the
// settings whose default is declared as a constant by the package that uses it.
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
