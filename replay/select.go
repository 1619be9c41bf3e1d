// Package replay sends dead-lettered validation requests to the requests topic again once the
// cause of their failure is fixed (`rulevalidator deadletter list|replay`). It selects dead
// letters by reason, tenant, ruleset and time; sends each selected original, its key, value
// and headers as they were, with headers recording the replay (schemas.HeaderReplayCount and
// the others); and records each replay in a compacted progress topic, keyed by the dead
// letter's position, only once the broker has acknowledged the request. A dead letter so
// recorded is never sent again, whatever the selection: an interrupted replay resumes where it
// stopped, a repeated one sends nothing, and a request that fails again comes back as a new
// dead letter, at a new offset, with its replay count one higher, which caps it.
package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"rulevalidator/producer"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// Position is where a record is: its topic, partition and offset.
type Position struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Offset    int64  `json:"offset"`
}

// String is topic/partition/offset, the form of the progress topic's keys.
func (p Position) String() string { return fmt.Sprintf("%s/%d/%d", p.Topic, p.Partition, p.Offset) }

// DeadLetter is one record of the dead-letter topic and what decoding it, and the original it
// keeps, tells.
type DeadLetter struct {
	// At is where the dead letter is.
	At Position
	// Letter is the dead letter; nil when the record is not a readable one.
	Letter *schemas.DeadLetter
	// Request is the original validation request; nil when the original cannot be read as one.
	Request *schemas.Request
	// Replays is how many times the original had been replayed (its rv-replay-count).
	Replays int
	// Problem says why the original cannot be sent again; empty when it can.
	Problem string
}

// Original is where the dead-lettered message was consumed from.
func (d *DeadLetter) Original() Position {
	if d.Letter == nil {
		return Position{}
	}
	return Position{Topic: d.Letter.OriginalTopic, Partition: d.Letter.OriginalPartition, Offset: d.Letter.OriginalOffset}
}

// RequestID is the original request's id, else its record key.
func (d *DeadLetter) RequestID() string {
	switch {
	case d.Request != nil && d.Request.RequestID != "":
		return d.Request.RequestID
	case d.Letter != nil && d.Letter.OriginalKey != nil:
		return string(d.Letter.OriginalKey)
	}
	return ""
}

// TenantID is the original request's tenant; empty when it could not be read.
func (d *DeadLetter) TenantID() string {
	if d.Request == nil {
		return ""
	}
	return d.Request.TenantID
}

// Ruleset is the id and version of the ruleset the original request names, by reference or
// inline; empty when it names none that can be read, version empty for the latest.
func (d *DeadLetter) Ruleset() (id, version string) {
	if d.Request == nil {
		return "", ""
	}
	if ref := d.Request.RulesetRef; ref != nil {
		if ref.Version != nil {
			version = *ref.Version
		}
		return ref.ID, version
	}
	if d.Request.InlineRuleset != nil {
		var inline struct {
			ID      string `json:"id"`
			Version string `json:"version"`
		}
		if json.Unmarshal([]byte(*d.Request.InlineRuleset), &inline) == nil {
			return inline.ID, inline.Version
		}
	}
	return "", ""
}

// Inspect reads a record of the dead-letter topic: the dead letter, the original request it
// keeps and the original's replay count. Whatever cannot be read is said in Problem; the dead
// letter is then never sent again.
func Inspect(ctx context.Context, serde *schemas.Serde, rec stream.Record) *DeadLetter {
	d := &DeadLetter{At: Position{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}}
	ev, err := serde.Decode(ctx, rec.Topic, rec.Value, rec.Headers)
	if err != nil {
		d.Problem = "not a readable dead letter: " + err.Error()
		return d
	}
	dl, ok := ev.(*schemas.DeadLetter)
	if !ok {
		d.Problem = fmt.Sprintf("a %s, not a dead letter", ev.SchemaName())
		return d
	}
	d.Letter = dl
	// The original of a dead letter too large for its topic is not in it.
	if uri, ok := stream.HeaderValue(rec.Headers, producer.HeaderDLQValueURI); ok {
		d.Problem = fmt.Sprintf("the original value is not in the dead letter: it was too large for the dead-letter topic and is stored at %s", uri)
		return d
	}
	if kept, ok := stream.HeaderValue(rec.Headers, producer.HeaderDLQValueTruncated); ok {
		d.Problem = fmt.Sprintf("the dead letter keeps only the first %s bytes of the original value: it was too large for the dead-letter topic", kept)
		return d
	}
	ev, err = serde.Decode(ctx, dl.OriginalTopic, dl.OriginalValue, dl.OriginalHeaders)
	var re *schemas.RequestError
	switch {
	case errors.As(err, &re) && re.Request != nil:
		// It decodes but fails its checks: what it names can still be selected.
		d.Request = re.Request
	case err != nil:
		d.Problem = "the original cannot be decoded: " + err.Error()
		return d
	default:
		req, ok := ev.(*schemas.Request)
		if !ok {
			d.Problem = fmt.Sprintf("the original is a %s, not a validation request", ev.SchemaName())
			return d
		}
		d.Request = req
	}
	if d.Replays, err = schemas.ReplayCount(dl.OriginalHeaders); err != nil {
		d.Problem = "the original's " + err.Error()
	}
	return d
}

// Filter selects dead letters. Its zero value selects every one.
type Filter struct {
	// Reasons: a dead letter of any of them; empty, any reason.
	Reasons []schemas.Reason
	// Tenant: only the original requests of this tenant.
	Tenant string
	// RulesetID: only original requests naming this ruleset; with RulesetVersion, naming
	// this version of it.
	RulesetID      string
	RulesetVersion string
	// Since and Until bound when the dead letters failed: Since included, Until not; the
	// zero time leaves that side open.
	Since, Until time.Time
}

// Match says whether the filter selects d. A dead letter whose original cannot be read
// matches a filter on tenant or ruleset never, as neither is known; a record that is not a
// readable dead letter matches only the empty filter.
func (f Filter) Match(d *DeadLetter) bool {
	if d.Letter == nil {
		return f.empty()
	}
	dl := d.Letter
	if len(f.Reasons) > 0 && !slices.Contains(f.Reasons, dl.Reason) {
		return false
	}
	if !f.Since.IsZero() && dl.FailedAt.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && !dl.FailedAt.Before(f.Until) {
		return false
	}
	if f.Tenant != "" && d.TenantID() != f.Tenant {
		return false
	}
	if f.RulesetID != "" {
		id, version := d.Ruleset()
		if id != f.RulesetID || (f.RulesetVersion != "" && version != f.RulesetVersion) {
			return false
		}
	}
	return true
}

func (f Filter) empty() bool {
	return len(f.Reasons) == 0 && f.Tenant == "" && f.RulesetID == "" && f.Since.IsZero() && f.Until.IsZero()
}

// String describes the selection in the command's flags, as the progress topic records it.
func (f Filter) String() string {
	var parts []string
	if len(f.Reasons) > 0 {
		reasons := make([]string, len(f.Reasons))
		for i, r := range f.Reasons {
			reasons[i] = string(r)
		}
		parts = append(parts, "--reason "+strings.Join(reasons, ","))
	}
	if f.Tenant != "" {
		parts = append(parts, "--tenant "+f.Tenant)
	}
	if f.RulesetID != "" {
		ruleset := f.RulesetID
		if f.RulesetVersion != "" {
			ruleset += "@" + f.RulesetVersion
		}
		parts = append(parts, "--ruleset "+ruleset)
	}
	if !f.Since.IsZero() {
		parts = append(parts, "--since "+f.Since.UTC().Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		parts = append(parts, "--until "+f.Until.UTC().Format(time.RFC3339Nano))
	}
	if len(parts) == 0 {
		return "every dead letter"
	}
	return strings.Join(parts, " ")
}

// ParseReasons reads reasons given as values, each one or a comma-separated list, checking
// each against the dead-letter reasons (schemas.Reasons); repeats are dropped.
func ParseReasons(values []string) ([]schemas.Reason, error) {
	var out []schemas.Reason
	for _, v := range values {
		for name := range strings.SplitSeq(v, ",") {
			r := schemas.Reason(strings.TrimSpace(name))
			if r == "" {
				continue
			}
			if !r.Known() {
				known := make([]string, len(schemas.Reasons))
				for i, k := range schemas.Reasons {
					known[i] = string(k)
				}
				return nil, fmt.Errorf("%q is not a dead-letter reason (known: %s)", r, strings.Join(known, ", "))
			}
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// ParseRuleset reads a ruleset given as id or id@version.
func ParseRuleset(s string) (id, version string, err error) {
	id, version, pinned := strings.Cut(strings.TrimSpace(s), "@")
	switch {
	case id == "":
		return "", "", fmt.Errorf("%q names no ruleset id (id or id@version)", s)
	case pinned && version == "":
		return "", "", fmt.Errorf("%q names no version after @ (id or id@version)", s)
	}
	return id, version, nil
}

// ParseTime reads a time given in RFC 3339, or as a duration before now (24h: a day ago).
func ParseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("%q is neither a time in RFC 3339 (2026-03-04T12:00:00Z) nor a positive duration before now (24h, 90m)", s)
	}
	return now.Add(-d), nil
}
