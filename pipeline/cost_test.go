package pipeline

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"rulevalidator/consumer"
	"rulevalidator/docread"
	"rulevalidator/engine"
	"rulevalidator/judging"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// claims holds one claim-checked object.
type claims struct{ data []byte }

func (c claims) ClaimSize(context.Context, string, string) (int64, error) {
	return int64(len(c.data)), nil
}

func (c claims) GetClaim(context.Context, string, string) ([]byte, error) { return c.data, nil }

// reserver stands in for the consumer's reservation of the message being handled.
type reserver struct {
	mu             sync.Mutex
	reserved, held int64
}

func (r *reserver) Reserve(_ context.Context, n int64) (func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reserved += n
	r.held += n
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.held -= n
	}, nil
}

// TestHandleReservesInTheBytesInFlight: the documents a request reads are counted in the bytes
// in flight of its message (consumer.Reserve, the use case's Reserve), and given back once
// the handling lets go of the request, its events published.
func TestHandleReservesInTheBytesInFlight(t *testing.T) {
	static, ok, serde := oneRuleFixture(t)
	text := []byte("page one\fpage two")
	reader, err := docread.New(docread.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := &reserver{}
	var heldAtPublish int64
	pub := &flakyPublisher{}
	p, err := New(Config{
		Judging: judging.Config{Engine: &countingEngine{res: ok}, Rulesets: static, Objects: claims{text}, Documents: reader},
		Serde:   serde, Publisher: publishing{pub, func() { r.mu.Lock(); heldAtPublish = r.held; r.mu.Unlock() }}, CacheEntries: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	req := &schemas.Request{RequestID: "req-1", TenantID: "t", RulesetRef: &schemas.RulesetRef{ID: "rs"}, SubmittedAt: time.Now(),
		PrimaryDocs: []schemas.Document{{Name: "a.txt", URI: ptr("s3://docs/claims/t/a.txt"), ContentType: ptr("text/plain")}}}
	m := requestMessage(t, serde, req)
	if err := p.Handle(consumer.WithReserver(context.Background(), r), m); err != nil {
		t.Fatal(err)
	}
	// The claim check's cost (cite mode) from its size, then the file kept besides its text.
	n := int64(len(text))
	if want := judging.MaterialCost(engine.EvidenceCite, n) + n; r.reserved != want || heldAtPublish != want {
		t.Errorf("reserved %d bytes, %d held when the events were published; want %d", r.reserved, heldAtPublish, want)
	}
	if r.held != 0 {
		t.Errorf("%d bytes still held after Handle returned, want 0", r.held)
	}
}

// publishing is a Publisher that calls written before each write.
type publishing struct {
	Publisher
	written func()
}

func (p publishing) Write(ctx context.Context, msgs []stream.Record) error {
	p.written()
	return p.Publisher.Write(ctx, msgs)
}

// TestGivingUpForTheDrainHoldsNothing: a request that gave up waiting for room in the bytes
// in flight because its partition is being given up is not an environment fault.
func TestGivingUpForTheDrainHoldsNothing(t *testing.T) {
	p, _, m := handleFixture(t, fakeEngine{res: passResult()}, nil)
	p.observeEnvironment(context.Background(), m, fmt.Errorf("reserving: %w", consumer.ErrDraining))
	if err := p.EnvironmentCheck(context.Background()); err != nil {
		t.Errorf("readiness after a request gave up at the drain = %v, want nil", err)
	}
}
