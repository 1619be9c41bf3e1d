package stream

import (
	"context"
	"strings"
	"testing"
)

func TestNewClientChecksEverythingOnce(t *testing.T) {
	tests := []struct {
		name string
		cfg  ClientConfig
		want []string // each must appear; nil: accepted
	}{
		{"minimal", ClientConfig{Brokers: []string{"k:9092"}}, nil},
		{"plain sasl", ClientConfig{Brokers: []string{"k:9092"}, SASL: SASLConfig{Mechanism: "plain", Username: "u", Password: "p"}}, nil},
		{"scram", ClientConfig{Brokers: []string{"k:9092"}, SASL: SASLConfig{Mechanism: SASLSCRAMSHA512, Username: "u", Password: "p"}}, nil},
		{"no brokers", ClientConfig{}, []string{"Brokers is empty"}},
		{"blank and portless brokers", ClientConfig{Brokers: []string{" ", "kafka"}}, []string{"Brokers[0] is empty", `Brokers[1] "kafka" has no port`}},
		{"unknown mechanism", ClientConfig{Brokers: []string{"k:1"}, SASL: SASLConfig{Mechanism: "GSSAPI"}}, []string{`SASL.Mechanism "GSSAPI" is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`}},
		{"missing credentials", ClientConfig{Brokers: []string{"k:1"}, SASL: SASLConfig{Mechanism: SASLSCRAMSHA256}},
			[]string{"SCRAM-SHA-256 needs SASL.Username", "SCRAM-SHA-256 needs SASL.Password"}},
		{"credentials without mechanism", ClientConfig{Brokers: []string{"k:1"}, SASL: SASLConfig{Username: "u"}}, []string{"without a SASL.Mechanism"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClient(tt.cfg)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("NewClient: %v", err)
				}
				if c.cfg.ClientID != DefaultClientID {
					t.Errorf("ClientID %q, want the default %q", c.cfg.ClientID, DefaultClientID)
				}
				return
			}
			if err == nil {
				t.Fatal("NewClient accepted the config")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestGroupConfigValidate(t *testing.T) {
	cfg := GroupConfig{Client: mustClient(t, "k:1"), GroupID: "g", Topic: "t", SessionTimeout: 6e9, HeartbeatInterval: 6e9, Start: 7}
	cfg.SetDefaults()
	err := cfg.Validate()
	for _, w := range []string{"HeartbeatInterval (6s) must be shorter than SessionTimeout (6s)", "Start must be FromStart or FromEnd, got 7"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate = %v, want it to say %q", err, w)
		}
	}
	ok := GroupConfig{Client: mustClient(t, "k:1"), GroupID: "g", Topic: "t"}
	if _, err := NewGroup(ok); err != nil {
		t.Errorf("NewGroup with defaults: %v", err)
	}
}

func TestReaderProgress(t *testing.T) {
	r, err := NewReader(ReaderConfig{Client: mustClient(t, "k:1"), Topics: []string{"a", "b"}, Handle: func(context.Context, Record) {}})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Lagging(); got != "partitions not listed yet" {
		t.Errorf("Lagging before listing = %q", got)
	}
	added := r.add(map[string][]int{"a": {0, 1}, "b": {0}})
	if len(added) != 3 {
		t.Fatalf("added %v, want 3 partitions", added)
	}
	r.advance(topicPartition{"a", 0}, 3, 10)
	r.advance(topicPartition{"a", 1}, 0, 0) // empty: caught up at once
	r.advance(topicPartition{"b", 0}, 5, 5)
	if got, want := r.Lagging(), "a partition 0 at offset 3 of 10"; got != want {
		t.Errorf("Lagging = %q, want %q", got, want)
	}
	select {
	case <-r.Ready():
		t.Fatal("ready with a partition behind")
	default:
	}
	// A partition added later is read from its start and does not hold readiness back.
	later := r.add(map[string][]int{"a": {0, 1, 2}, "b": {0}})
	if len(later) != 1 || later[0] != (topicPartition{"a", 2}) || r.parts[later[0]].start != FromStart.offset() {
		t.Fatalf("second listing added %v", later)
	}
	r.advance(topicPartition{"a", 0}, 10, -1)
	select {
	case <-r.Ready():
	default:
		t.Fatalf("not ready once every first-listed partition caught up: %s", r.Lagging())
	}
}
