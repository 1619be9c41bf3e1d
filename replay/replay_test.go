package replay

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"rulevalidator/producer"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

const (
	requestsTopic   = "rulevalidator.requests"
	deadLetterTopic = "rulevalidator.deadletter"
)

var failedAt = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

func newSerde(t *testing.T) *schemas.Serde {
	t.Helper()
	s, err := schemas.NewSerde(context.Background(), schemas.SerdeConfig{Format: schemas.FormatPlain})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func request(id, tenant, ruleset string) *schemas.Request {
	text := "The agreement is governed by the laws of Delaware."
	return &schemas.Request{
		RequestID:   id,
		TenantID:    tenant,
		RulesetRef:  &schemas.RulesetRef{ID: ruleset},
		TextInput:   &text,
		SubmittedAt: failedAt.Add(-time.Minute),
	}
}

// deadLetterRecord is the record of a dead letter of original (its value and headers) at
// offset of the dead-letter topic, with extra headers on the dead letter.
func deadLetterRecord(t *testing.T, serde *schemas.Serde, offset int64, reason schemas.Reason, key string, value []byte, headers []schemas.Header, extra ...schemas.Header) stream.Record {
	t.Helper()
	dl := &schemas.DeadLetter{
		OriginalTopic:     requestsTopic,
		OriginalPartition: 2,
		OriginalOffset:    40 + offset,
		OriginalTimestamp: failedAt.Add(-time.Second),
		OriginalKey:       []byte(key),
		OriginalValue:     value,
		OriginalHeaders:   headers,
		Reason:            reason,
		Message:           "it failed",
		FailedAt:          failedAt.Add(time.Duration(offset) * time.Minute),
		Attempts:          1,
	}
	v, h, err := serde.Encode(deadLetterTopic, dl)
	if err != nil {
		t.Fatal(err)
	}
	return stream.Record{Topic: deadLetterTopic, Partition: 0, Offset: offset, Key: []byte(key), Value: v, Headers: append(h, extra...)}
}

// requestDeadLetter is the record of a dead letter of req at offset, the original carrying
// extra headers besides its wire format's and a traceparent.
func requestDeadLetter(t *testing.T, serde *schemas.Serde, offset int64, reason schemas.Reason, req *schemas.Request, extra ...schemas.Header) stream.Record {
	t.Helper()
	v, h, err := serde.Encode(requestsTopic, req)
	if err != nil {
		t.Fatal(err)
	}
	h = append(h, schemas.Header{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")})
	return deadLetterRecord(t, serde, offset, reason, req.RequestID, v, append(h, extra...))
}

func TestInspect(t *testing.T) {
	serde := newSerde(t)
	ctx := context.Background()
	req := request("r-1", "acme", "contract-review")

	d := Inspect(ctx, serde, requestDeadLetter(t, serde, 3, schemas.ReasonUnknownRuleset, req))
	if d.Problem != "" || d.Request == nil || d.RequestID() != "r-1" || d.TenantID() != "acme" || d.Replays != 0 {
		t.Fatalf("a request's dead letter: %+v", d)
	}
	if id, version := d.Ruleset(); id != "contract-review" || version != "" {
		t.Errorf("ruleset %q %q", id, version)
	}
	if want := (Position{deadLetterTopic, 0, 3}); d.At != want || d.Original() != (Position{requestsTopic, 2, 43}) {
		t.Errorf("at %v original %v", d.At, d.Original())
	}

	replayed := Inspect(ctx, serde, requestDeadLetter(t, serde, 4, schemas.ReasonUnknownRuleset, req, schemas.Header{Key: schemas.HeaderReplayCount, Value: []byte("2")}))
	if replayed.Replays != 2 || replayed.Problem != "" {
		t.Errorf("replayed twice: %+v", replayed)
	}

	inline := request("r-2", "acme", "")
	inline.RulesetRef = nil
	inline.InlineRuleset = ptr(`{"id": "inline-rs", "version": "2.0.0", "rules": []}`)
	if id, version := Inspect(ctx, serde, requestDeadLetter(t, serde, 5, schemas.ReasonInvalidRuleset, inline)).Ruleset(); id != "inline-rs" || version != "2.0.0" {
		t.Errorf("inline ruleset %q %q", id, version)
	}

	invalid := request("r-3", "acme", "contract-review")
	invalid.TextInput = nil // no input at all: decodes, fails its checks
	if d := Inspect(ctx, serde, requestDeadLetter(t, serde, 6, schemas.ReasonInvalidRequest, invalid)); d.Problem != "" || d.TenantID() != "acme" {
		t.Errorf("a request that fails its checks: %+v", d)
	}

	for _, tc := range []struct {
		name    string
		rec     stream.Record
		problem string
	}{
		{"undecodable original", deadLetterRecord(t, serde, 7, schemas.ReasonUndecodable, "k", []byte("{not avro"), nil), "the original cannot be decoded"},
		{"claim-checked original", deadLetterRecord(t, serde, 8, schemas.ReasonOversized, "k", []byte{}, nil,
			schemas.Header{Key: producer.HeaderDLQValueURI, Value: []byte("s3://b/deadletter/x/0/8")}), "stored at s3://b/deadletter/x/0/8"},
		{"truncated original", deadLetterRecord(t, serde, 9, schemas.ReasonOversized, "k", []byte("abc"), nil,
			schemas.Header{Key: producer.HeaderDLQValueTruncated, Value: []byte("3")}), "only the first 3 bytes"},
		{"bad replay count", requestDeadLetter(t, serde, 10, schemas.ReasonUnknownRuleset, req,
			schemas.Header{Key: schemas.HeaderReplayCount, Value: []byte("many")}), `rv-replay-count: "many" is not a count`},
		{"not a dead letter", stream.Record{Topic: deadLetterTopic, Offset: 11, Value: []byte("x")}, "not a readable dead letter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Inspect(ctx, serde, tc.rec)
			if !strings.Contains(d.Problem, tc.problem) {
				t.Errorf("problem %q, want it to say %q", d.Problem, tc.problem)
			}
		})
	}
}

func TestFilterMatch(t *testing.T) {
	serde := newSerde(t)
	ctx := context.Background()
	pinned := request("r-pinned", "acme", "contract-review")
	pinned.RulesetRef.Version = ptr("1.0.0")
	letters := map[string]*DeadLetter{
		"acme unknown":     Inspect(ctx, serde, requestDeadLetter(t, serde, 0, schemas.ReasonUnknownRuleset, request("r-0", "acme", "contract-review"))),
		"acme pinned":      Inspect(ctx, serde, requestDeadLetter(t, serde, 1, schemas.ReasonUnknownRuleset, pinned)),
		"globex unknown":   Inspect(ctx, serde, requestDeadLetter(t, serde, 2, schemas.ReasonUnknownRuleset, request("r-2", "globex", "contract-review"))),
		"acme quota":       Inspect(ctx, serde, requestDeadLetter(t, serde, 3, schemas.ReasonQuotaExceeded, request("r-3", "acme", "nda"))),
		"undecodable":      Inspect(ctx, serde, deadLetterRecord(t, serde, 4, schemas.ReasonUndecodable, "k", []byte("junk"), nil)),
		"not a deadletter": Inspect(ctx, serde, stream.Record{Topic: deadLetterTopic, Offset: 5, Value: []byte("x")}),
	}
	for _, tc := range []struct {
		name   string
		filter Filter
		want   []string
	}{
		{"everything", Filter{}, []string{"acme pinned", "acme quota", "acme unknown", "globex unknown", "not a deadletter", "undecodable"}},
		{"reason", Filter{Reasons: []schemas.Reason{schemas.ReasonUnknownRuleset}}, []string{"acme pinned", "acme unknown", "globex unknown"}},
		{"reasons", Filter{Reasons: []schemas.Reason{schemas.ReasonQuotaExceeded, schemas.ReasonUndecodable}}, []string{"acme quota", "undecodable"}},
		{"tenant", Filter{Tenant: "acme"}, []string{"acme pinned", "acme quota", "acme unknown"}},
		{"reason and tenant", Filter{Reasons: []schemas.Reason{schemas.ReasonUnknownRuleset}, Tenant: "acme"}, []string{"acme pinned", "acme unknown"}},
		{"ruleset", Filter{RulesetID: "contract-review"}, []string{"acme pinned", "acme unknown", "globex unknown"}},
		{"ruleset version", Filter{RulesetID: "contract-review", RulesetVersion: "1.0.0"}, []string{"acme pinned"}},
		// failed_at is failedAt plus the offset in minutes.
		{"since", Filter{Since: failedAt.Add(3 * time.Minute)}, []string{"acme quota", "undecodable"}},
		{"until", Filter{Until: failedAt.Add(time.Minute)}, []string{"acme unknown"}},
		{"since and until", Filter{Since: failedAt.Add(time.Minute), Until: failedAt.Add(3 * time.Minute)}, []string{"acme pinned", "globex unknown"}},
		{"tenant nobody has", Filter{Tenant: "initech"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for name, d := range letters {
				if tc.filter.Match(d) {
					got = append(got, name)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("selected %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFilterString(t *testing.T) {
	f := Filter{Reasons: []schemas.Reason{schemas.ReasonUnknownRuleset, schemas.ReasonQuotaExceeded}, Tenant: "acme",
		RulesetID: "contract-review", RulesetVersion: "1.0.0", Since: failedAt}
	want := "--reason unknown_ruleset,quota_exceeded --tenant acme --ruleset contract-review@1.0.0 --since 2026-03-04T12:00:00Z"
	if got := f.String(); got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if got := (Filter{}).String(); got != "every dead letter" {
		t.Errorf("empty filter: %q", got)
	}
}

func TestParseReasons(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []schemas.Reason
		err  string
	}{
		{nil, nil, ""},
		{[]string{"unknown_ruleset"}, []schemas.Reason{schemas.ReasonUnknownRuleset}, ""},
		{[]string{"unknown_ruleset, quota_exceeded", "timeout", "unknown_ruleset"}, []schemas.Reason{schemas.ReasonUnknownRuleset, schemas.ReasonQuotaExceeded, schemas.ReasonTimeout}, ""},
		{[]string{"unknown-ruleset"}, nil, `"unknown-ruleset" is not a dead-letter reason (known: undecodable, invalid_request,`},
	} {
		got, err := ParseReasons(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one saying %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseRuleset(t *testing.T) {
	for _, tc := range []struct {
		in, id, version, err string
	}{
		{"contract-review", "contract-review", "", ""},
		{"contract-review@1.0.0", "contract-review", "1.0.0", ""},
		{"@1.0.0", "", "", "names no ruleset id"},
		{"contract-review@", "", "", "names no version after @"},
		{"", "", "", "names no ruleset id"},
	} {
		id, version, err := ParseRuleset(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one saying %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || id != tc.id || version != tc.version):
			t.Errorf("%q: %q %q %v; want %q %q", tc.in, id, version, err, tc.id, tc.version)
		}
	}
}

func TestParseTime(t *testing.T) {
	now := failedAt
	for _, tc := range []struct {
		in   string
		want time.Time
		err  bool
	}{
		{"2026-03-01T08:30:00Z", time.Date(2026, 3, 1, 8, 30, 0, 0, time.UTC), false},
		{"2026-03-01T08:30:00+02:00", time.Date(2026, 3, 1, 6, 30, 0, 0, time.UTC), false},
		{"24h", now.Add(-24 * time.Hour), false},
		{"90m", now.Add(-90 * time.Minute), false},
		{"-1h", time.Time{}, true},
		{"yesterday", time.Time{}, true},
		{"2026-03-01", time.Time{}, true},
	} {
		got, err := ParseTime(tc.in, now)
		if (err != nil) != tc.err || !got.Equal(tc.want) {
			t.Errorf("%q: %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestRecordCarriesTheOriginalAndTheReplay(t *testing.T) {
	serde := newSerde(t)
	req := request("r-1", "acme", "contract-review")
	at := failedAt.Add(time.Hour)
	for _, tc := range []struct {
		name      string
		earlier   []schemas.Header // headers of an earlier replay on the original
		wantCount string
	}{
		{"first replay", nil, "1"},
		{"third replay", []schemas.Header{
			{Key: schemas.HeaderReplayCount, Value: []byte("2")},
			{Key: schemas.HeaderReplayTopic, Value: []byte("old")},
			{Key: schemas.HeaderReplayTime, Value: []byte("then")},
		}, "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Inspect(context.Background(), serde, requestDeadLetter(t, serde, 7, schemas.ReasonUnknownRuleset, req, tc.earlier...))
			rec := Record(d, "requests-2", at)
			if rec.Topic != "requests-2" || string(rec.Key) != "r-1" || string(rec.Value) != string(d.Letter.OriginalValue) {
				t.Fatalf("record %s key %q, want the original's key and value on requests-2", rec.Topic, rec.Key)
			}
			want := map[string]string{
				schemas.HeaderReplayCount:      tc.wantCount,
				schemas.HeaderReplayTopic:      requestsTopic,
				schemas.HeaderReplayPartition:  "2",
				schemas.HeaderReplayOffset:     "47",
				schemas.HeaderReplayDeadLetter: deadLetterTopic + "/0/7",
				schemas.HeaderReplayTime:       "2026-03-04T13:00:00Z",
				"traceparent":                  "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
				schemas.HeaderSchema:           schemas.RequestSchema,
			}
			seen := map[string]int{}
			for _, h := range rec.Headers {
				seen[h.Key]++
				if w, ok := want[h.Key]; ok && string(h.Value) != w {
					t.Errorf("header %s = %q, want %q", h.Key, h.Value, w)
				}
			}
			for k := range want {
				if seen[k] != 1 {
					t.Errorf("header %s appears %d times, want once", k, seen[k])
				}
			}
			if _, ok := stream.HeaderValue(rec.Headers, schemas.HeaderFingerprint); !ok {
				t.Error("the wire format's fingerprint header is gone")
			}
			// The replayed record decodes as the original request.
			ev, err := serde.Decode(context.Background(), rec.Topic, rec.Value, rec.Headers)
			if got, ok := ev.(*schemas.Request); err != nil || !ok || got.RequestID != "r-1" {
				t.Errorf("the replayed record decodes as %v, %v", ev, err)
			}
			if n, err := schemas.ReplayCount(rec.Headers); err != nil || tc.wantCount != map[int]string{1: "1", 3: "3"}[n] {
				t.Errorf("ReplayCount %d, %v", n, err)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	serde := newSerde(t)
	ctx := context.Background()
	req := request("r-1", "acme", "contract-review")
	fresh := Inspect(ctx, serde, requestDeadLetter(t, serde, 0, schemas.ReasonUnknownRuleset, req))
	thrice := Inspect(ctx, serde, requestDeadLetter(t, serde, 1, schemas.ReasonUnknownRuleset, req, schemas.Header{Key: schemas.HeaderReplayCount, Value: []byte("3")}))
	twice := Inspect(ctx, serde, requestDeadLetter(t, serde, 2, schemas.ReasonUnknownRuleset, req, schemas.Header{Key: schemas.HeaderReplayCount, Value: []byte("2")}))
	undecodable := Inspect(ctx, serde, deadLetterRecord(t, serde, 3, schemas.ReasonUndecodable, "k", []byte("junk"), nil))
	// A second dead letter of fresh's original (dead-lettered twice), at another offset.
	duplicate := Inspect(ctx, serde, requestDeadLetter(t, serde, 0, schemas.ReasonUnknownRuleset, req))
	duplicate.At.Offset = 9
	// A dead letter at fresh's position that failed at another time: the topic was recreated.
	recreated := Inspect(ctx, serde, requestDeadLetter(t, serde, 0, schemas.ReasonUnknownRuleset, req))
	recreated.Letter.FailedAt = recreated.Letter.FailedAt.Add(time.Hour)
	recreated.Letter.OriginalTimestamp = recreated.Letter.OriginalTimestamp.Add(time.Hour)

	none := newProgress()
	replayed := newProgress()
	replayed.add(newMarker(fresh, Position{requestsTopic, 1, 100}, failedAt.Add(time.Hour), "--tenant acme"))

	for _, tc := range []struct {
		name    string
		d       *DeadLetter
		done    *progress
		sending map[Position]Position
		want    Status
		why     string
	}{
		{"fresh", fresh, none, nil, StatusReplayable, ""},
		{"replayed before", fresh, replayed, nil, StatusReplayed, "replayed at 2026-03-04T13:00:00Z as replay 1, to rulevalidator.requests/1/100"},
		{"duplicate of a replayed one", duplicate, replayed, nil, StatusReplayed, "its original was replayed from dead letter rulevalidator.deadletter/0/0"},
		{"duplicate of one this run sends", duplicate, none, map[Position]Position{fresh.Original(): fresh.At}, StatusReplayed, "its original is replayed from dead letter rulevalidator.deadletter/0/0"},
		{"recreated topic", recreated, replayed, nil, StatusReplayable, ""},
		{"replayed 3 times", thrice, none, nil, StatusRefused, "replayed 3 times already, the most allowed is 3"},
		{"replayed twice", twice, none, nil, StatusReplayable, ""},
		{"undecodable", undecodable, none, nil, StatusNotReplayable, "the original cannot be decoded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sending := tc.sending
			if sending == nil {
				sending = map[Position]Position{}
			}
			out := decide(tc.d, tc.done, sending, DefaultMaxReplays)
			if out.Status != tc.want || !strings.Contains(out.Why, tc.why) || (tc.why == "") != (out.Why == "") {
				t.Errorf("%s: %q; want %s: %q", out.Status, out.Why, tc.want, tc.why)
			}
		})
	}
}

func TestProgressReadsMarkersAndTombstones(t *testing.T) {
	serde := newSerde(t)
	d := Inspect(context.Background(), serde, requestDeadLetter(t, serde, 4, schemas.ReasonUnknownRuleset, request("r-1", "acme", "contract-review")))
	m := newMarker(d, Position{requestsTopic, 0, 12}, failedAt.Add(time.Hour), "--reason unknown_ruleset")
	rec, err := m.record("progress")
	if err != nil {
		t.Fatal(err)
	}
	if string(rec.Key) != deadLetterTopic+"/0/4" {
		t.Errorf("marker key %q", rec.Key)
	}
	var fields map[string]any
	if err := json.Unmarshal(rec.Value, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"deadletter", "failed_at", "original", "original_time", "request_id", "tenant_id", "reason", "replay", "replayed_at", "sent_to", "selection"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("the marker has no %s: %s", k, rec.Value)
		}
	}

	p := newProgress()
	p.read(rec)
	p.read(stream.Record{Key: []byte("other/0/1"), Value: []byte("not json")})
	if _, ok := p.replayed(d); !ok || p.unreadable != 1 {
		t.Fatalf("after the marker: replayed %v, %d unreadable", ok, p.unreadable)
	}
	p.read(stream.Record{Key: rec.Key}) // a tombstone forgets it
	if _, ok := p.replayed(d); ok {
		t.Error("a tombstone did not forget the marker")
	}
}

func TestConfigValidate(t *testing.T) {
	cfg := Config{DeadLetterTopic: "a", RequestsTopic: "a", ProgressTopic: "c", MaxReplays: -1}
	cfg.setDefaults()
	err := cfg.Validate()
	for _, want := range []string{"Client is nil", "Serde is nil", "must differ", "MaxReplays -1 must be at least 1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v, want it to say %q", err, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
