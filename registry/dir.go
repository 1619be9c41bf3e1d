package registry

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"rulevalidator/engine"
)

// DirOptions configures a Dir.
type DirOptions struct {
	// PollInterval is how often Run looks for changed files. Default 2s.
	PollInterval time.Duration
	// Logger receives load errors, duplicates and reloads. Default slog.Default().
	Logger *slog.Logger
}

const defaultPollInterval = 2 * time.Second

// mtimeGranularity is the coarsest file time resolution trusted: a file whose
// mtime is this close to when it was last read could have been written again
// without its mtime or size changing, so it is read and hashed again.
const mtimeGranularity = 2 * time.Second

// Dir serves the rulesets in a directory tree: every *.yaml, *.yml and *.json
// file under it is one ruleset, which must have an id. Names starting with "."
// are skipped, files and directories alike, so editor swap files and the
// timestamped copies in a Kubernetes ConfigMap volume are not loaded twice;
// symbolic links to files are followed, links to directories are not.
// Latest is the highest version (see CompareVersions).
//
// A file that stops parsing keeps its previous good ruleset served; a deleted
// file takes its ruleset away. When two files hold the same (id, version), the
// first by path is served and the clash is logged.
type Dir struct {
	root string
	poll time.Duration
	log  *slog.Logger

	mu  sync.RWMutex // guards idx
	idx *index

	scanMu sync.Mutex // serialises scans; guards files and walkErrs
	files  map[string]*dirFile
	// walkErrs are the directory read errors of the last scan, logged only
	// when they change so a lasting one does not flood the log.
	walkErrs map[string]string
}

// dirFile is what the last scan saw of one file.
type dirFile struct {
	size   int64
	mtime  time.Time
	readAt time.Time
	hash   [sha256.Size]byte
	entry  *Entry // last good ruleset from this file; nil if it never parsed
}

// NewDir loads every ruleset under dir. A file that does not parse is logged
// and skipped; an unreadable dir is an error.
func NewDir(dir string, opts DirOptions) (*Dir, error) {
	if opts.PollInterval < 0 {
		return nil, fmt.Errorf("registry: DirOptions.PollInterval must not be negative (got %s)", opts.PollInterval)
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = defaultPollInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	root := filepath.Clean(dir)
	info, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("registry: ruleset directory: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("registry: ruleset directory %s is not a directory", root)
	}
	d := &Dir{
		root:  root,
		poll:  opts.PollInterval,
		log:   opts.Logger.With("ruleset_dir", root),
		idx:   &index{byID: map[string]*versions{}},
		files: make(map[string]*dirFile),
	}
	if err := d.scan(); err != nil {
		return nil, err
	}
	return d, nil
}

// Run polls the directory every PollInterval and reloads what changed, until
// ctx ends; it then returns nil. Problems with single files are logged, never
// returned, so the rulesets already loaded stay served.
func (d *Dir) Run(ctx context.Context) error {
	ticker := time.NewTicker(d.poll)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			if err := d.scan(); err != nil {
				d.log.Error("registry: ruleset directory unreadable; still serving what was loaded", "err", err)
			}
		}
	}
}

// Resolve returns the ruleset id at version, or its highest version when version is "".
func (d *Dir) Resolve(_ context.Context, id, version string) (*engine.Ruleset, error) {
	d.mu.RLock()
	idx := d.idx
	d.mu.RUnlock()
	return idx.resolve(id, version)
}

// List returns every ruleset served, ordered by id and then version.
func (d *Dir) List() []Entry {
	d.mu.RLock()
	idx := d.idx
	d.mu.RUnlock()
	return idx.list()
}

// scan reads what changed since the last scan and swaps in a new index when
// the set of rulesets changed. It fails only when the root cannot be read,
// and then changes nothing.
func (d *Dir) scan() error {
	d.scanMu.Lock()
	defer d.scanMu.Unlock()

	seen := make(map[string]bool, len(d.files))
	// Files under a directory that could not be read are kept, not deleted:
	// a permission problem must not unload rulesets.
	var unreadable []string
	walkErrs := make(map[string]string)
	changed := false

	// WalkDir does not follow a root that is a symbolic link, so walk its
	// target, resolved afresh each time, and name files under the root given.
	target, err := filepath.EvalSymlinks(d.root)
	if err != nil {
		return fmt.Errorf("registry: reading ruleset directory %s: %w", d.root, err)
	}
	err = filepath.WalkDir(target, func(walked string, entry fs.DirEntry, err error) error {
		path := d.root
		if rel, relErr := filepath.Rel(target, walked); relErr == nil && rel != "." {
			path = filepath.Join(d.root, rel)
		}
		if err != nil {
			if path == d.root {
				return err
			}
			walkErrs[path] = err.Error()
			unreadable = append(unreadable, path)
			return nil
		}
		if path != d.root && strings.HasPrefix(entry.Name(), ".") {
			if entry.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if entry.IsDir() || !rulesetFile(entry.Name()) {
			return nil
		}
		present, loaded := d.load(path)
		seen[path] = present
		changed = changed || loaded
		return nil
	})
	if err != nil {
		return fmt.Errorf("registry: reading ruleset directory %s: %w", d.root, err)
	}
	d.logWalkErrors(walkErrs)

	for path, f := range d.files {
		if seen[path] || under(path, unreadable) {
			continue
		}
		delete(d.files, path)
		if f.entry != nil {
			d.log.Info("registry: ruleset file removed; its ruleset is no longer served",
				"path", path, "ruleset_id", f.entry.ID, "ruleset_version", f.entry.Version)
			changed = true
		}
	}
	if changed {
		d.reindex()
	}
	return nil
}

// load reads path if it may have changed. present is false when there is no
// file (it vanished since it was listed, or is a dangling link); loaded says
// whether the ruleset it serves changed.
func (d *Dir) load(path string) (present, loaded bool) {
	info, err := os.Stat(path) // follows a symbolic link to the file
	if errors.Is(err, fs.ErrNotExist) {
		return false, false
	}
	if err != nil {
		// Present but unreadable: keep what it served until it can be read.
		d.log.Error("registry: ruleset file unreadable", "path", path, "err", err)
		return true, false
	}
	if info.IsDir() {
		return false, false
	}
	f := d.files[path]
	if f != nil && f.size == info.Size() && f.mtime.Equal(info.ModTime()) &&
		info.ModTime().Before(f.readAt.Add(-mtimeGranularity)) {
		return true, false
	}
	readAt := time.Now()
	data, err := os.ReadFile(path)
	if err != nil {
		d.log.Error("registry: ruleset file unreadable", "path", path, "err", err)
		return true, false
	}
	hash := sha256.Sum256(data)
	if f == nil {
		f = &dirFile{}
		d.files[path] = f
	} else if f.hash == hash {
		f.size, f.mtime, f.readAt = info.Size(), info.ModTime(), readAt
		return true, false
	}
	f.size, f.mtime, f.readAt, f.hash = info.Size(), info.ModTime(), readAt, hash

	rs, err := parseRulesetFile(data)
	if err != nil {
		args := []any{"path", path, "err", err}
		if f.entry != nil {
			args = append(args, "still_serving_version", f.entry.Version)
			d.log.Error("registry: ruleset file does not parse; still serving its previous version", args...)
		} else {
			d.log.Error("registry: ruleset file does not parse; skipped", args...)
		}
		return true, false
	}
	f.entry = &Entry{ID: rs.ID, Version: rs.Version, Source: path, Ruleset: rs, Loaded: readAt}
	d.log.Info("registry: ruleset loaded", "path", path, "ruleset_id", rs.ID, "ruleset_version", rs.Version)
	return true, true
}

func parseRulesetFile(data []byte) (*engine.Ruleset, error) {
	rs, err := engine.ParseRuleset(data)
	if err != nil {
		return nil, err
	}
	if rs.ID == "" {
		return nil, fmt.Errorf("%w: no id: every ruleset file needs an id", engine.ErrInvalidRuleset)
	}
	return rs, nil
}

// reindex builds the index from every file's last good ruleset, in path order
// so that the first file wins a clash.
func (d *Dir) reindex() {
	paths := make([]string, 0, len(d.files))
	for path, f := range d.files {
		if f.entry != nil {
			paths = append(paths, path)
		}
	}
	slices.Sort(paths)
	entries := make([]Entry, len(paths))
	for i, path := range paths {
		entries[i] = *d.files[path].entry
	}
	idx, dups := newIndex(entries)
	for _, dup := range dups {
		d.log.Error("registry: two ruleset files hold the same id and version; serving the first by path",
			"ruleset_id", dup.kept.ID, "ruleset_version", dup.kept.Version,
			"served", dup.kept.Source, "ignored", dup.dropped.Source)
	}
	d.mu.Lock()
	d.idx = idx
	d.mu.Unlock()
}

func (d *Dir) logWalkErrors(errs map[string]string) {
	for path, msg := range errs {
		if d.walkErrs[path] != msg {
			d.log.Error("registry: directory unreadable; keeping the rulesets already loaded from it", "path", path, "err", msg)
		}
	}
	d.walkErrs = errs
}

func rulesetFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// under says whether path is one of dirs or inside one.
func under(path string, dirs []string) bool {
	for _, dir := range dirs {
		if path == dir || strings.HasPrefix(path, dir+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
