package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"rulevalidator/consumer"
)

// printPublisher stands in for the service's dead-letter producer.
type printPublisher struct{}

func (printPublisher) PublishDeadLetter(_ context.Context, m *consumer.Message, reason string, _ error) error {
	fmt.Printf("dead-lettered offset %d: %s\n", m.Offset, reason)
	return nil
}

// A handler marks what no retry can fix as permanent; the chain dead-letters it and reports
// the message handled, so that the partition moves on.
func ExampleChain() {
	handle := func(ctx context.Context, m *consumer.Message) error {
		if !json.Valid(m.Value) {
			return consumer.Permanent("undecodable", errors.New("value is not JSON"))
		}
		if string(m.Value) == "null" {
			panic("nil request")
		}
		fmt.Printf("handled offset %d\n", m.Offset)
		return nil
	}
	h := consumer.Chain(handle,
		consumer.Retry(consumer.RetryPolicy{}, nil),
		consumer.DeadLetter(printPublisher{}, nil),
		consumer.Recover(nil),
	)
	for i, value := range []string{`{"request_id":"r1"}`, `not json`, `null`} {
		m := &consumer.Message{Topic: "requests", Offset: int64(i), Value: []byte(value)}
		if err := h(context.Background(), m); err != nil {
			fmt.Println("error:", err)
		}
	}
	// Output:
	// handled offset 0
	// dead-lettered offset 1: undecodable
	// dead-lettered offset 2: internal
}
