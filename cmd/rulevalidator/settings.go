package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// setting is one configuration value of a long-running command. Values come,
// lowest precedence first, from the default, the config file (key name), the
// environment (env) and the command line (--name).
type setting struct {
	name  string // flag name and config-file key
	env   string // environment variable; empty for none
	def   string // default, as text
	help  string
	apply func(value string) error
	// isBool lets the flag stand alone (--name means --name=true).
	isBool bool
}

// settings is a command's configuration surface.
type settings struct {
	list []setting
}

func (s *settings) add(name, env, def, help string, apply func(string) error) {
	s.list = append(s.list, setting{name: name, env: env, def: def, help: help, apply: apply})
}

func (s *settings) str(p *string, name, env, def, help string) {
	s.add(name, env, def, help, func(v string) error { *p = v; return nil })
}

func (s *settings) secret(p *string, name, env, help string) {
	s.add(name, env, "", help, func(v string) error { *p = v; return nil })
}

func (s *settings) strList(p *[]string, name, env, def, help string) {
	s.add(name, env, def, help, func(v string) error {
		*p = nil
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				*p = append(*p, part)
			}
		}
		return nil
	})
}

func (s *settings) integer(p *int, name, env, def, help string) {
	s.add(name, env, def, help, func(v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		*p = n
		return nil
	})
}

func (s *settings) duration(p *time.Duration, name, env, def, help string) {
	s.add(name, env, def, help, func(v string) error {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not a duration (like 500ms, 30s, 5m)", v)
		}
		*p = d
		return nil
	})
}

func (s *settings) boolean(p *bool, name, env, def, help string) {
	s.add(name, env, def, help, func(v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		*p = b
		return nil
	})
	s.list[len(s.list)-1].isBool = true
}

// textFlag holds a flag's raw text until the settings are applied in order.
type textFlag struct {
	value  string
	isBool bool
}

func (f *textFlag) String() string     { return f.value }
func (f *textFlag) Set(v string) error { f.value = v; return nil }
func (f *textFlag) IsBoolFlag() bool   { return f.isBool }

// load applies defaults, then the config file named by --config, then the
// environment, then the flags. Every error names the setting and where its
// value came from.
func (s *settings) load(fs *flag.FlagSet, args []string, getenv env) error {
	byName := map[string]*setting{}
	flagValues := map[string]*textFlag{}
	for i := range s.list {
		st := &s.list[i]
		byName[st.name] = st
		flagValues[st.name] = &textFlag{value: st.def, isBool: st.isBool}
		fs.Var(flagValues[st.name], st.name, s.usage(st))
	}
	configPath := fs.String("config", "", "config file (YAML or JSON) with any of the settings below, by name")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	for _, st := range s.list {
		if err := st.apply(st.def); err != nil {
			return fmt.Errorf("default of %s: %w", st.name, err)
		}
	}
	if *configPath != "" {
		values, err := readConfigFile(*configPath)
		if err != nil {
			return err
		}
		for _, key := range sortedKeys(values) {
			st, ok := byName[key]
			if !ok {
				return fmt.Errorf("%s: unknown setting %q", *configPath, key)
			}
			if err := st.apply(values[key]); err != nil {
				return fmt.Errorf("%s: %s: %w", *configPath, key, err)
			}
		}
	}
	for _, st := range s.list {
		if st.env == "" {
			continue
		}
		if v, ok := lookup(getenv, st.env); ok {
			if err := st.apply(v); err != nil {
				return fmt.Errorf("environment %s: %w", st.env, err)
			}
		}
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if st, ok := byName[f.Name]; ok && err == nil {
			if e := st.apply(flagValues[f.Name].value); e != nil {
				err = fmt.Errorf("--%s: %w", f.Name, e)
			}
		}
	})
	return err
}

func (s *settings) usage(st *setting) string {
	if st.env == "" {
		return st.help
	}
	return st.help + " (env " + st.env + ")"
}

// reference writes every setting as a Markdown table row, for the README.
func (s *settings) reference(w io.Writer) {
	fmt.Fprintln(w, "| flag / config key | environment | default | meaning |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	for _, st := range s.list {
		env, def := st.env, st.def
		if env == "" {
			env = "-"
		}
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(w, "| `--%s` | `%s` | `%s` | %s |\n", st.name, env, def, st.help)
	}
}

// lookup reads an environment variable; an empty value counts as unset.
func lookup(getenv env, key string) (string, bool) {
	v := getenv(key)
	return v, v != ""
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
