package pipeline

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/judging"
	"rulevalidator/producer"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// resultPublisher keeps the results it encodes and fails its first writes.
type resultPublisher struct {
	flakyPublisher
	mu      sync.Mutex
	results []producer.Result
}

func (r *resultPublisher) Encode(ctx context.Context, res producer.Result) ([]stream.Record, error) {
	r.mu.Lock()
	r.results = append(r.results, res)
	r.mu.Unlock()
	out, err := r.flakyPublisher.Encode(ctx, res)
	if res.Callback != nil {
		out = append(out, stream.Record{Topic: "callbacks", Key: []byte(res.Summary.EventID), Value: res.Callback.Payload})
	}
	return out, err
}

// A request asking for a callback publishes it with its events, completed or
// failed, and a publish retry re-sends it with them; without CallbackPayload,
// or without a callback URL, there is none.
func TestCallbackIsPublishedWithTheEvents(t *testing.T) {
	static, ok, serde := oneRuleFixture(t)
	payload := func(req *schemas.Request, out judging.Events) ([]byte, []byte, error) {
		return fmt.Appendf(nil, `{"id":%q,"status":%q,"verdicts":%d}`, req.RequestID, out.Summary.Status, len(out.Verdicts)),
			fmt.Appendf(nil, `{"id":%q,"status":%q}`, req.RequestID, out.Summary.Status), nil
	}
	tests := []struct {
		name         string
		eng          *countingEngine
		withPayload  bool
		callbackURL  *string
		wantCallback string // "" when none
	}{
		{"completed", &countingEngine{res: ok}, true, ptr("https://hooks.example.com/rv"), `{"id":"req-1","status":"completed","verdicts":1}`},
		{"failed", &countingEngine{err: fmt.Errorf("%w: still invalid", engine.ErrInvalidOutput)}, true, ptr("https://hooks.example.com/rv"), `{"id":"req-1","status":"failed","verdicts":0}`},
		{"no callback asked for", &countingEngine{res: ok}, true, nil, ""},
		{"callbacks not configured", &countingEngine{res: ok}, false, ptr("https://hooks.example.com/rv"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pub := &resultPublisher{flakyPublisher: flakyPublisher{failures: 1}}
			cfg := Config{Judging: judging.Config{Engine: tc.eng, Rulesets: static}, Serde: serde, Publisher: pub, CacheEntries: -1}
			if tc.withPayload {
				cfg.CallbackPayload = payload
			}
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			req := &schemas.Request{RequestID: "req-1", TenantID: "t", RulesetRef: &schemas.RulesetRef{ID: "rs"}, TextInput: ptr("hello"),
				Options: schemas.Options{CallbackURL: tc.callbackURL}, SubmittedAt: time.Now()}
			m := requestMessage(t, serde, req)
			if err := p.Handle(context.Background(), m); err == nil {
				t.Fatal("the first attempt succeeded with the broker down")
			}
			_ = p.Handle(context.Background(), m)
			if len(pub.results) != 1 || len(pub.writes) != 2 || len(pub.written) != 1 {
				t.Fatalf("%d encodes, %d writes, %d written; want 1, 2, 1", len(pub.results), len(pub.writes), len(pub.written))
			}
			cb := pub.results[0].Callback
			if tc.wantCallback == "" {
				if cb != nil {
					t.Fatalf("callback %+v, want none", cb)
				}
				return
			}
			if cb == nil || cb.URL != *tc.callbackURL || string(cb.Payload) != tc.wantCallback || len(cb.Fallback) == 0 {
				t.Fatalf("callback %+v, want %s to %s with a fallback", cb, tc.wantCallback, *tc.callbackURL)
			}
			written := pub.written[0]
			if last := written[len(written)-1]; last.Topic != "callbacks" || string(last.Value) != tc.wantCallback {
				t.Errorf("the re-sent write ends with %s %q, want the callback", last.Topic, last.Value)
			}
		})
	}
}
