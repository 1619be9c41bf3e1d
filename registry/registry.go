// Package registry resolves rulesets by reference (id, version) for the
// streaming service. Rulesets come from a directory of files (Dir), from a
// compacted Kafka topic that upstream teams publish to (Topic), or from a
// fixed list (Static); Chain puts sources in order of precedence.
//
// Every ruleset a resolver returns has been validated, so it may be shared
// read-only by concurrent requests: callers must not modify it.
package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"rulevalidator/engine"
	"rulevalidator/internal/fault"
)

// ErrUnknownRuleset is wrapped by every error for a ruleset id or version that
// a resolver does not know, e.g. `unknown ruleset "contract-review" version "9"`.
// It is a permanent error: the request names something that does not exist. It is
// fault.ErrUnknownRuleset, which the failure table reads without importing this package.
var ErrUnknownRuleset = fault.ErrUnknownRuleset

// Resolver finds a validated ruleset by id and version; version "" asks for
// the latest. Errors for an id or version it does not know wrap
// ErrUnknownRuleset; any other error is not a verdict on the reference.
type Resolver interface {
	Resolve(ctx context.Context, id, version string) (*engine.Ruleset, error)
}

// Entry is one loaded ruleset and where it came from.
type Entry struct {
	ID      string
	Version string
	// Source is the file path, or topic/partition/offset, it was loaded from.
	Source  string
	Ruleset *engine.Ruleset
	Loaded  time.Time
}

// unknownError is an ErrUnknownRuleset that lists the versions known for the
// id, when there are any, so the message says what could have been asked for.
type unknownError struct {
	id, version string
	known       []string
}

func (e *unknownError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q", ErrUnknownRuleset, e.id)
	if e.version != "" {
		fmt.Fprintf(&b, " version %q", e.version)
	}
	if len(e.known) > 0 {
		const shown = 10
		known := e.known
		if len(known) > shown {
			known = known[len(known)-shown:] // the highest
		}
		quoted := make([]string, len(known))
		for i, v := range known {
			quoted[i] = fmt.Sprintf("%q", v)
		}
		fmt.Fprintf(&b, " (known versions: %s", strings.Join(quoted, ", "))
		if len(e.known) > shown {
			fmt.Fprintf(&b, " and %d lower", len(e.known)-shown)
		}
		b.WriteString(")")
	}
	return b.String()
}

func (e *unknownError) Is(target error) bool { return target == ErrUnknownRuleset }

// Chain resolves through resolvers in order: the first that knows the
// reference wins. ErrUnknownRuleset falls through to the next resolver; any
// other error stops the chain and is returned, since a source that cannot
// answer must not be overruled by a later one.
func Chain(resolvers ...Resolver) Resolver {
	return chain(slices.Clone(resolvers))
}

type chain []Resolver

func (c chain) Resolve(ctx context.Context, id, version string) (*engine.Ruleset, error) {
	var first error
	var known []string // versions of the id that the sources know, when asked for another
	for _, r := range c {
		rs, err := r.Resolve(ctx, id, version)
		if err == nil {
			return rs, nil
		}
		if !errors.Is(err, ErrUnknownRuleset) {
			return nil, err
		}
		if first == nil {
			first = err
		}
		var ue *unknownError
		if errors.As(err, &ue) {
			known = append(known, ue.known...)
		}
	}
	if first == nil || len(known) > 0 {
		slices.SortFunc(known, CompareVersions)
		return nil, &unknownError{id: id, version: version, known: slices.Compact(known)}
	}
	return nil, first
}

// Static resolves from a fixed set of rulesets; latest is the highest version
// (see CompareVersions).
type Static struct {
	idx *index
}

// NewStatic validates rulesets (resolving their defaults in place) and serves
// them. Each needs an id, and no two may share an (id, version).
func NewStatic(rulesets ...*engine.Ruleset) (*Static, error) {
	now := time.Now()
	entries := make([]Entry, 0, len(rulesets))
	seen := make(map[[2]string]int, len(rulesets))
	for i, rs := range rulesets {
		if rs == nil {
			return nil, fmt.Errorf("registry: rulesets[%d] is nil", i)
		}
		if rs.ID == "" {
			return nil, fmt.Errorf("registry: rulesets[%d] has no id", i)
		}
		if err := rs.Validate(); err != nil {
			return nil, fmt.Errorf("registry: rulesets[%d]: %w", i, err)
		}
		key := [2]string{rs.ID, rs.Version}
		if first, dup := seen[key]; dup {
			return nil, fmt.Errorf("registry: rulesets[%d] and rulesets[%d] are both ruleset %q version %q", first, i, rs.ID, rs.Version)
		}
		seen[key] = i
		entries = append(entries, Entry{ID: rs.ID, Version: rs.Version, Source: fmt.Sprintf("static[%d]", i), Ruleset: rs, Loaded: now})
	}
	idx, _ := newIndex(entries)
	return &Static{idx: idx}, nil
}

// Resolve returns the ruleset id at version, or its highest version when version is "".
func (s *Static) Resolve(_ context.Context, id, version string) (*engine.Ruleset, error) {
	return s.idx.resolve(id, version)
}

// List returns every ruleset, ordered by id and then version.
func (s *Static) List() []Entry { return s.idx.list() }

// index serves entries by (id, version), latest being the highest version.
// It is immutable once built.
type index struct {
	byID map[string]*versions
}

type versions struct {
	byVersion map[string]*Entry
	ordered   []string // ascending by CompareVersions; the last is the latest
}

// duplicate is an entry left out because an earlier one has its (id, version).
type duplicate struct {
	kept, dropped *Entry
}

// newIndex indexes entries; when two share an (id, version) the first is kept
// and the pair is reported.
func newIndex(entries []Entry) (*index, []duplicate) {
	idx := &index{byID: make(map[string]*versions)}
	var dups []duplicate
	for i := range entries {
		e := &entries[i]
		vs := idx.byID[e.ID]
		if vs == nil {
			vs = &versions{byVersion: make(map[string]*Entry)}
			idx.byID[e.ID] = vs
		}
		if kept, dup := vs.byVersion[e.Version]; dup {
			dups = append(dups, duplicate{kept: kept, dropped: e})
			continue
		}
		vs.byVersion[e.Version] = e
		vs.ordered = append(vs.ordered, e.Version)
	}
	for _, vs := range idx.byID {
		slices.SortFunc(vs.ordered, CompareVersions)
	}
	return idx, dups
}

func (x *index) resolve(id, version string) (*engine.Ruleset, error) {
	vs := x.byID[id]
	if vs == nil {
		return nil, &unknownError{id: id, version: version}
	}
	if version == "" {
		return vs.byVersion[vs.ordered[len(vs.ordered)-1]].Ruleset, nil
	}
	e := vs.byVersion[version]
	if e == nil {
		return nil, &unknownError{id: id, version: version, known: slices.Clone(vs.ordered)}
	}
	return e.Ruleset, nil
}

func (x *index) list() []Entry {
	ids := make([]string, 0, len(x.byID))
	n := 0
	for id, vs := range x.byID {
		ids = append(ids, id)
		n += len(vs.ordered)
	}
	slices.Sort(ids)
	out := make([]Entry, 0, n)
	for _, id := range ids {
		vs := x.byID[id]
		for _, v := range vs.ordered {
			out = append(out, *vs.byVersion[v])
		}
	}
	return out
}
