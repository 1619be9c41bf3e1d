package consumer

import (
	"context"
	"strings"
	"testing"
	"time"

	"rulevalidator/stream"
)

func validConfig() Config {
	client, err := stream.NewClient(stream.ClientConfig{Brokers: []string{"127.0.0.1:9092"}})
	if err != nil {
		panic(err)
	}
	return Config{GroupConfig: stream.GroupConfig{Client: client, GroupID: "g", Topic: "t"}}
}

func TestNewAppliesDefaults(t *testing.T) {
	c, err := New(validConfig(), func(context.Context, *Message) error { return nil })
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	got := c.cfg
	if got.Concurrency != DefaultConcurrency || got.CommitInterval != DefaultCommitInterval ||
		got.CommitTimeout != DefaultCommitTimeout || got.DrainTimeout != DefaultDrainTimeout ||
		got.SessionTimeout != stream.DefaultSessionTimeout || got.RebalanceTimeout != DefaultDrainTimeout+handlerExitGrace+DefaultCommitTimeout+rebalanceMargin ||
		got.MinBytes != stream.DefaultMinBytes || got.MaxBytes != stream.DefaultMaxBytes || got.MaxWait != stream.DefaultMaxWait ||
		got.Start != stream.FromStart || got.PartitionWatchInterval != stream.DefaultPartitionWatchInterval || got.Logger == nil {
		t.Errorf("defaults not applied: %+v", got)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		want   []string // each must appear in the error
	}{
		{"no client", func(c *Config) { c.Client = nil }, []string{"Client is nil"}},
		{"no group", func(c *Config) { c.GroupID = "" }, []string{"GroupID is empty"}},
		{"no topic", func(c *Config) { c.Topic = "" }, []string{"Topic is empty"}},
		{"negative concurrency", func(c *Config) { c.Concurrency = -1 }, []string{"Concurrency must be positive, got -1"}},
		{"negative commit interval", func(c *Config) { c.CommitInterval = -time.Second }, []string{"CommitInterval must be positive, got -1s"}},
		{"negative commit timeout", func(c *Config) { c.CommitTimeout = -time.Second }, []string{"CommitTimeout must be positive, got -1s"}},
		{"negative drain timeout", func(c *Config) { c.DrainTimeout = -time.Second }, []string{"DrainTimeout must be positive, got -1s"}},
		{"negative session timeout", func(c *Config) { c.SessionTimeout = -time.Second }, []string{"SessionTimeout must be positive, got -1s"}},
		{"negative max wait", func(c *Config) { c.MaxWait = -time.Millisecond }, []string{"MaxWait must be positive, got -1ms"}},
		{"negative min bytes", func(c *Config) { c.MinBytes = -1 }, []string{"MinBytes must be positive, got -1"}},
		{"min above max", func(c *Config) { c.MinBytes, c.MaxBytes = 10, 5 }, []string{"MinBytes (10) is greater than MaxBytes (5)"}},
		{"bad start", func(c *Config) { c.Start = 42 }, []string{"Start must be FromStart or FromEnd, got 42"}},
		{"negative partition watch", func(c *Config) { c.PartitionWatchInterval = -time.Second }, []string{"PartitionWatchInterval must be positive, got -1s"}},
		{"rebalance shorter than a drain", func(c *Config) { c.RebalanceTimeout = 40 * time.Second },
			[]string{"RebalanceTimeout (40s) must exceed what a drain may take, 45s"}},
		{"every problem at once", func(c *Config) { c.Client, c.GroupID, c.Topic = nil, "", "" },
			[]string{"Client is nil", "GroupID is empty", "Topic is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := validConfig()
			tt.modify(&cfg)
			_, err := New(cfg, func(context.Context, *Message) error { return nil })
			if err == nil {
				t.Fatal("New accepted the config")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestNewRejectsNilHandler(t *testing.T) {
	if _, err := New(validConfig(), nil); err == nil || !strings.Contains(err.Error(), "handler is nil") {
		t.Fatalf("New(cfg, nil) = %v, want an error saying the handler is nil", err)
	}
}

func TestFairnessConfig(t *testing.T) {
	t.Run("defaults, the caller's left as it was", func(t *testing.T) {
		cfg := validConfig()
		f := &Fairness{Tenant: TenantHeader("rv-tenant-id")}
		cfg.Fairness = f
		c, err := New(cfg, func(context.Context, *Message) error { return nil })
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if got := c.cfg.Fairness.ReadAhead; got != DefaultReadAhead {
			t.Errorf("ReadAhead = %d, want the default %d", got, DefaultReadAhead)
		}
		if f.ReadAhead != 0 {
			t.Errorf("the caller's Fairness was changed: ReadAhead %d", f.ReadAhead)
		}
		if got := c.cfg.readAhead(); got != DefaultReadAhead {
			t.Errorf("readAhead() = %d", got)
		}
	})
	t.Run("without fairness nothing is read ahead", func(t *testing.T) {
		c, err := New(validConfig(), func(context.Context, *Message) error { return nil })
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if got := c.cfg.readAhead(); got != 0 {
			t.Errorf("readAhead() = %d, want 0", got)
		}
		if got := c.cfg.tenantOf(&Message{Headers: []Header{{Key: "rv-tenant-id", Value: []byte("acme")}}}); got != "" {
			t.Errorf("tenantOf = %q, want \"\": one queue", got)
		}
	})
	for _, tc := range []struct {
		name     string
		fairness Fairness
		want     string
	}{
		{"no tenant", Fairness{}, "Fairness.Tenant is nil"},
		{"negative read-ahead", Fairness{Tenant: TenantHeader("t"), ReadAhead: -1}, "Fairness.ReadAhead must not be negative, got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			cfg.Fairness = &tc.fairness
			_, err := New(cfg, func(context.Context, *Message) error { return nil })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
