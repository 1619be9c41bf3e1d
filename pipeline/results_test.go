package pipeline

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"rulevalidator/engine"
	"rulevalidator/judging"
	"rulevalidator/objstore"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// flakyResults fails its first stores with err and records, with the publisher, the order
// in which results were stored and events written.
type flakyResults struct {
	mu       sync.Mutex
	failures int
	err      error
	stored   []judging.Events
	order    *[]string
}

func (f *flakyResults) StoreResult(_ context.Context, req *schemas.Request, out judging.Events) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures > 0 {
		f.failures--
		return f.err
	}
	f.stored = append(f.stored, out)
	*f.order = append(*f.order, "store "+req.RequestID)
	return nil
}

type orderedPublisher struct {
	flakyPublisher
	order *[]string
}

func (o *orderedPublisher) Write(ctx context.Context, msgs []stream.Record) error {
	if err := o.flakyPublisher.Write(ctx, msgs); err != nil {
		return err
	}
	*o.order = append(*o.order, "publish "+string(msgs[len(msgs)-1].Key))
	return nil
}

var _ Publisher = (*orderedPublisher)(nil)

// TestResultStoredBeforePublishing: the result is stored before the events go out; while
// storing fails, whatever the store's error says (even a refusal that would blame a message
// elsewhere), the request is held as an environment fault, nothing is published, and the
// retry stores and publishes what was built the first time without asking the model again.
func TestResultStoredBeforePublishing(t *testing.T) {
	static, ok, serde := oneRuleFixture(t)
	s3Err := func(code string, status int) error {
		return &objstore.OpError{Op: "put", URI: "s3://b/jobs/t/req-1.json", Attempts: 1, Err: minio.ErrorResponse{Code: code, StatusCode: status}}
	}
	for _, tc := range []struct {
		name      string
		err       error
		wantCause judging.Cause
	}{
		{"credentials refused", s3Err("AccessDenied", 403), judging.CauseStorageAuth},
		{"bucket missing", s3Err("NoSuchBucket", 404), judging.CauseStorageBucket},
		{"store overloaded", s3Err("SlowDown", 503), judging.CauseStorageUnavailable},
		{"a refusal that names no cause", s3Err("InvalidArgument", 400), judging.CauseStorageUnavailable},
		{"unreachable", context.DeadlineExceeded, judging.CauseTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var order []string
			eng := &countingEngine{res: ok}
			pub := &orderedPublisher{order: &order}
			results := &flakyResults{failures: 2, err: tc.err, order: &order}
			p, err := New(Config{Judging: judging.Config{Engine: eng, Rulesets: static}, Serde: serde, Publisher: pub, Results: results, CacheEntries: -1})
			if err != nil {
				t.Fatal(err)
			}
			req := &schemas.Request{RequestID: "req-1", TenantID: "t", RulesetRef: &schemas.RulesetRef{ID: "rs"}, TextInput: ptr("hello"), SubmittedAt: time.Now()}
			m := requestMessage(t, serde, req)
			for attempt := 1; attempt <= 2; attempt++ {
				err := p.Handle(context.Background(), m)
				if _, permanent := judging.MessageFault(err); err == nil || permanent {
					t.Fatalf("attempt %d with storage failing: %v, want an error that holds the request", attempt, err)
				}
				if f := judging.Classify(err); f.Message || f.Cause != tc.wantCause {
					t.Fatalf("attempt %d: classified %+v, want the environment fault %s", attempt, f, tc.wantCause)
				}
				if !errors.Is(err, tc.err) {
					t.Errorf("attempt %d: %v does not wrap the store's error", attempt, err)
				}
				if p.EnvironmentCheck(context.Background()) == nil {
					t.Errorf("attempt %d: readiness passes while the result cannot be stored", attempt)
				}
			}
			if len(pub.writes) != 0 {
				t.Fatalf("%d writes while the result could not be stored, want none", len(pub.writes))
			}
			if err := p.Handle(context.Background(), m); err != nil {
				t.Fatalf("once storage is back: %v", err)
			}
			if eng.calls != 1 {
				t.Errorf("the engine was asked %d times, want once", eng.calls)
			}
			if want := []string{"store req-1", "publish req-1"}; len(order) != 2 || order[0] != want[0] || order[1] != want[1] {
				t.Errorf("order %q, want %q", order, want)
			}
			if len(results.stored) != 1 || results.stored[0].Summary.Status != schemas.StatusCompleted || len(results.stored[0].Verdicts) != 1 {
				t.Errorf("stored %+v, want the completed outcome with its verdict", results.stored)
			}
			if p.EnvironmentCheck(context.Background()) != nil {
				t.Error("the fault still holds after the request got through")
			}
		})
	}
}

// replayResults records the replay count each result was stored under.
type replayResults struct {
	mu      sync.Mutex
	replays []int
	status  []schemas.Status
}

func (r *replayResults) StoreResult(ctx context.Context, _ *schemas.Request, out judging.Events) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.replays = append(r.replays, judging.Replay(ctx))
	r.status = append(r.status, out.Summary.Status)
	return nil
}

// TestAReplayedRequestIsJudgedAgain: a request that failed for its own fault, sent again from
// its dead letter with rv-replay-count 1, is judged again (not answered as a redelivery), its
// completed result stored under replay 1; a redelivery of the replay is answered from the
// result cache.
func TestAReplayedRequestIsJudgedAgain(t *testing.T) {
	static, ok, serde := oneRuleFixture(t)
	eng := &countingEngine{err: &engine.OutputError{}}
	pub := &flakyPublisher{}
	results := &replayResults{}
	p, err := New(Config{Judging: judging.Config{Engine: eng, Rulesets: static}, Serde: serde, Publisher: pub, Results: results})
	if err != nil {
		t.Fatal(err)
	}
	req := &schemas.Request{RequestID: "req-1", TenantID: "t", RulesetRef: &schemas.RulesetRef{ID: "rs"}, TextInput: ptr("hello"), SubmittedAt: time.Now()}
	m := requestMessage(t, serde, req)
	if _, permanent := judging.MessageFault(p.Handle(context.Background(), m)); !permanent {
		t.Fatal("the first attempt should fail for the message's fault")
	}

	eng.err, eng.res = nil, ok
	replayed := *m
	replayed.Offset = 7
	replayed.Headers = append(slices.Clone(m.Headers), stream.Header{Key: schemas.HeaderReplayCount, Value: []byte("1")})
	for range 2 { // the replay, then a redelivery of it
		if err := p.Handle(context.Background(), &replayed); err != nil {
			t.Fatalf("the replay: %v", err)
		}
	}
	if eng.calls != 2 {
		t.Errorf("the engine was asked %d times, want twice (the failed attempt and the replay)", eng.calls)
	}
	if want := []int{0, 1}; !slices.Equal(results.replays, want) || results.status[1] != schemas.StatusCompleted {
		t.Errorf("stored under replays %v with status %v, want %v and completed", results.replays, results.status, want)
	}
}
