package pipeline

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"rulevalidator/consumer"
	"rulevalidator/engine"
	"rulevalidator/judging"
	"rulevalidator/producer"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// countingEngine counts the model's work.
type countingEngine struct {
	mu    sync.Mutex
	calls int
	res   *engine.Result
	err   error
}

func (c *countingEngine) Evaluate(context.Context, engine.Task) (*engine.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return c.res, c.err
}

// flakyPublisher encodes one record per event and fails its first writes.
type flakyPublisher struct {
	mu       sync.Mutex
	failures int
	writes   [][]stream.Record
	written  [][]stream.Record
	// encodeCtx is the context of the last Encode.
	encodeCtx context.Context
}

func (f *flakyPublisher) Encode(ctx context.Context, r producer.Result) ([]stream.Record, error) {
	f.mu.Lock()
	f.encodeCtx = ctx
	f.mu.Unlock()
	var out []stream.Record
	for _, v := range r.Verdicts {
		out = append(out, stream.Record{Topic: "verdicts", Key: []byte(v.RequestID), Value: []byte(v.EventID + "/" + v.CompletedAt.String())})
	}
	return append(out, stream.Record{Topic: "summaries", Key: []byte(r.Summary.RequestID), Value: []byte(string(r.Summary.Status) + "/" + r.Summary.CompletedAt.String())}), nil
}

func (f *flakyPublisher) Write(_ context.Context, msgs []stream.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, msgs)
	if f.failures > 0 {
		f.failures--
		return errors.New("broker unavailable")
	}
	f.written = append(f.written, msgs)
	return nil
}

// TestPublishRetryResendsTheBuiltEvents: when publishing fails after the engine answered, the
// retry re-sends the very events built the first time, and the model is not asked again; a
// failed request's summary is re-sent the same way, with the same permanent error.
func TestPublishRetryResendsTheBuiltEvents(t *testing.T) {
	static, ok, serde := oneRuleFixture(t)
	for _, tc := range []struct {
		name       string
		eng        *countingEngine
		wantReason string // "" when the request completes
	}{
		{"completed", &countingEngine{res: ok}, ""},
		{"failed", &countingEngine{err: fmt.Errorf("%w: still invalid after re-asking", engine.ErrInvalidOutput)}, string(schemas.ReasonInvalidOutput)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub := &flakyPublisher{failures: 2}
			finished := 0
			clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			p, err := New(Config{
				Judging: judging.Config{Engine: tc.eng, Rulesets: static}, Serde: serde, Publisher: pub, CacheEntries: -1,
				Now:   func() time.Time { clock = clock.Add(time.Second); return clock },
				Hooks: Hooks{Finished: func(*schemas.Request, judging.Events) { finished++ }},
			})
			if err != nil {
				t.Fatal(err)
			}
			req := &schemas.Request{RequestID: "req-1", TenantID: "t", RulesetRef: &schemas.RulesetRef{ID: "rs"}, TextInput: ptr("hello"), SubmittedAt: clock}
			m := requestMessage(t, serde, req)
			for attempt := 1; attempt <= 2; attempt++ {
				err := p.Handle(context.Background(), m)
				if _, permanent := judging.MessageFault(err); err == nil || permanent {
					t.Fatalf("attempt %d with the broker down: %v, want a transient error", attempt, err)
				}
			}
			err = p.Handle(context.Background(), m)
			reason, _ := judging.MessageFault(err)
			if (tc.wantReason == "" && err != nil) || reason != tc.wantReason {
				t.Fatalf("once the broker is back: %v, want reason %q", err, tc.wantReason)
			}
			if tc.eng.calls != 1 {
				t.Errorf("the engine was asked %d times, want once", tc.eng.calls)
			}
			if len(pub.writes) != 3 || len(pub.written) != 1 {
				t.Fatalf("%d writes, %d succeeded", len(pub.writes), len(pub.written))
			}
			for i := 1; i < 3; i++ {
				if !reflect.DeepEqual(pub.writes[i], pub.writes[0]) {
					t.Errorf("write %d sent other events than the first:\n%v\n%v", i+1, pub.writes[i], pub.writes[0])
				}
			}
			if finished != 1 {
				t.Errorf("Finished called %d times, want once, after the write succeeded", finished)
			}
			if _, pending := p.unsent.get("t/req-1"); pending {
				t.Error("the re-sent events are still held after they were written")
			}
		})
	}
}

// TestEncodeRunsOnTheHandlersContext: encoding may ask the cluster (the
// callback topic's limit), so it runs on the handler's context: the drain
// deadline and the shutdown reach it.
func TestEncodeRunsOnTheHandlersContext(t *testing.T) {
	p, pub, m := handleFixture(t, &countingEngine{res: passResult()}, nil)
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "the handler's"))
	if err := p.Handle(ctx, m); err != nil {
		t.Fatal(err)
	}
	pub.mu.Lock()
	got := pub.encodeCtx
	pub.mu.Unlock()
	if got == nil || got.Value(key{}) != "the handler's" {
		t.Fatalf("Encode ran on %v, not on the handler's context", got)
	}
	cancel()
	if got.Err() == nil {
		t.Error("the context Encode ran on outlives the handler's")
	}
}

// TestFinishedRequestsKeepNoDocumentText: what is reported and remembered of a judged request
// is its envelope: ids, options and document names, not the documents' text, which the result
// cache would otherwise hold for every recent request.
func TestFinishedRequestsKeepNoDocumentText(t *testing.T) {
	static, passing, serde := oneRuleFixture(t)
	eng := &countingEngine{res: passing}
	var got *schemas.Request
	p, err := New(Config{Judging: judging.Config{Engine: eng, Rulesets: static}, Serde: serde, Publisher: &flakyPublisher{},
		Hooks: Hooks{Finished: func(req *schemas.Request, _ judging.Events) { got = req }}})
	if err != nil {
		t.Fatal(err)
	}
	callback := "https://example.com/hook"
	req := &schemas.Request{RequestID: "req-1", TenantID: "t", RulesetRef: &schemas.RulesetRef{ID: "rs"},
		PrimaryDocs:   []schemas.Document{{Name: "contract.pdf", Pages: []string{"page one", "page two"}}},
		AuxiliaryDocs: []schemas.Document{{Name: "policy", Content: ptr("the policy")}},
		TextInput:     ptr("notes"), Options: schemas.Options{CallbackURL: &callback}, SubmittedAt: time.Now().UTC().Truncate(time.Millisecond)}
	m := requestMessage(t, serde, req)
	if err := p.Handle(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	cached, ok := p.cache.get("t/req-1")
	if !ok {
		t.Fatal("the completed request is not in the result cache")
	}
	for name, r := range map[string]*schemas.Request{"Finished": got, "the cache": cached.req} {
		if r == nil {
			t.Fatalf("%s saw no request", name)
		}
		if r.RequestID != "req-1" || r.TenantID != "t" || r.Options.CallbackURL == nil || *r.Options.CallbackURL != callback || !r.SubmittedAt.Equal(req.SubmittedAt) {
			t.Errorf("%s lost the envelope: %+v", name, r)
		}
		if r.TextInput != nil || len(r.PrimaryDocs) != 1 || r.PrimaryDocs[0].Name != "contract.pdf" || r.PrimaryDocs[0].Pages != nil ||
			len(r.AuxiliaryDocs) != 1 || r.AuxiliaryDocs[0].Content != nil {
			t.Errorf("%s keeps input text: %+v", name, r)
		}
	}
}

// requestMessage is req encoded as the requests topic's message, with the
// headers the wire format gives it.
func requestMessage(t *testing.T, serde *schemas.Serde, req *schemas.Request) *consumer.Message {
	t.Helper()
	value, sh, err := serde.Encode("requests", req)
	if err != nil {
		t.Fatal(err)
	}
	m := &consumer.Message{Topic: "requests", Value: value}
	for _, h := range sh {
		m.Headers = append(m.Headers, stream.Header(h))
	}
	return m
}
