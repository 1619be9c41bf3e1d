package pipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"rulevalidator/judging"
	"rulevalidator/producer"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// tightPublisher is a flakyPublisher whose verdict topic takes no event, as
// a topic whose max.message.bytes a verdict is over.
type tightPublisher struct{ flakyPublisher }

func (p *tightPublisher) Encode(ctx context.Context, r producer.Result) ([]stream.Record, error) {
	if len(r.Verdicts) > 0 {
		return nil, fmt.Errorf("producer: the verdict event of rule %q is 2000000 bytes, over the 1048588 bytes topic verdicts takes: %w", r.Verdicts[0].RuleID, stream.ErrTooLarge)
	}
	return p.flakyPublisher.Encode(ctx, r)
}

// TestEventTooLargeFailsTheRequest: a verdict event larger than its topic
// takes is the request's fault: the request fails with a small summary
// naming why, the message is dead-lettered as oversized, and nothing holds
// the stream.
func TestEventTooLargeFailsTheRequest(t *testing.T) {
	static, ok, serde := oneRuleFixture(t)
	pub := &tightPublisher{}
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p, err := New(Config{
		Judging: judging.Config{Engine: &countingEngine{res: ok}, Rulesets: static}, Serde: serde, Publisher: pub, CacheEntries: -1,
		Now: func() time.Time { clock = clock.Add(time.Second); return clock },
	})
	if err != nil {
		t.Fatal(err)
	}
	req := &schemas.Request{RequestID: "req-1", TenantID: "t", RulesetRef: &schemas.RulesetRef{ID: "rs"}, TextInput: ptr("hello"), SubmittedAt: clock}
	m := requestMessage(t, serde, req)
	err = p.Handle(context.Background(), m)
	if reason, messageFault := judging.MessageFault(err); !messageFault || reason != string(schemas.ReasonOversized) {
		t.Fatalf("Handle = %v (reason %q, message fault %v), want the message's fault, oversized", err, reason, messageFault)
	}
	if len(pub.written) != 1 || len(pub.written[0]) != 1 || pub.written[0][0].Topic != "summaries" {
		t.Fatalf("written %v, want the one failed summary", pub.written)
	}
	if got := string(pub.written[0][0].Value); !strings.HasPrefix(got, string(schemas.StatusFailed)+"/") {
		t.Errorf("summary %q, want a failed one", got)
	}
	if !strings.Contains(err.Error(), `the verdict event of rule "`) {
		t.Errorf("error %q does not name the event that did not fit", err)
	}
}
