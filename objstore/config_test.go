package objstore_test

import (
	"strings"
	"testing"
	"time"

	"rulevalidator/objstore"
)

func validConfig() objstore.Config {
	return objstore.Config{
		Endpoint:  "127.0.0.1:7070",
		AccessKey: "access",
		SecretKey: "secret",
		Bucket:    "reports",
	}
}

func TestNewValidatesConfig(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*objstore.Config)
		wantErr []string // all must appear; nil means valid
	}{
		{name: "host:port", edit: func(*objstore.Config) {}},
		{name: "http URL", edit: func(c *objstore.Config) { c.Endpoint = "http://localhost:9000" }},
		{name: "https URL with trailing slash", edit: func(c *objstore.Config) { c.Endpoint = "https://s3.example.com/" }},
		{name: "host without port", edit: func(c *objstore.Config) { c.Endpoint = "s3.example.com"; c.UseTLS = true }},
		{name: "IPv6", edit: func(c *objstore.Config) { c.Endpoint = "[::1]:7070" }},
		{name: "allowed buckets", edit: func(c *objstore.Config) { c.AllowedBuckets = []string{"claims", "inbox-eu"} }},

		{name: "everything missing", edit: func(c *objstore.Config) { *c = objstore.Config{} },
			wantErr: []string{"Endpoint is empty", "AccessKey is empty", "SecretKey is empty", "Bucket is empty"}},
		{name: "endpoint with path", edit: func(c *objstore.Config) { c.Endpoint = "http://localhost:9000/s3" },
			wantErr: []string{`Endpoint "http://localhost:9000/s3": want scheme://host[:port] only`}},
		{name: "bare endpoint with path", edit: func(c *objstore.Config) { c.Endpoint = "localhost:9000/s3" },
			wantErr: []string{`Endpoint "localhost:9000/s3": want host:port or a URL`}},
		{name: "unknown scheme", edit: func(c *objstore.Config) { c.Endpoint = "ftp://localhost" },
			wantErr: []string{`scheme "ftp", want http or https`}},
		{name: "http with UseTLS", edit: func(c *objstore.Config) { c.Endpoint = "http://localhost:9000"; c.UseTLS = true },
			wantErr: []string{"is plain http but UseTLS is set"}},
		{name: "port out of range", edit: func(c *objstore.Config) { c.Endpoint = "localhost:70000" },
			wantErr: []string{`port "70000" is not a number from 1 to 65535`}},
		{name: "port not a number", edit: func(c *objstore.Config) { c.Endpoint = "localhost:http" },
			wantErr: []string{`port "http" is not a number`}},
		{name: "empty host", edit: func(c *objstore.Config) { c.Endpoint = ":7070" },
			wantErr: []string{"host is empty"}},
		{name: "bucket with upper case", edit: func(c *objstore.Config) { c.Bucket = "Reports" },
			wantErr: []string{`Bucket "Reports"`}},
		{name: "allowed bucket invalid", edit: func(c *objstore.Config) { c.AllowedBuckets = []string{"ok-bucket", "a"} },
			wantErr: []string{`AllowedBuckets[1] "a"`}},
		{name: "negative attempts", edit: func(c *objstore.Config) { c.MaxAttempts = -1 },
			wantErr: []string{"MaxAttempts is -1, want 1 or more"}},
		{name: "negative delay", edit: func(c *objstore.Config) { c.BaseDelay = -time.Second },
			wantErr: []string{"BaseDelay is -1s"}},
		{name: "negative cap", edit: func(c *objstore.Config) { c.MaxObjectBytes = -5 },
			wantErr: []string{"MaxObjectBytes is -5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := validConfig()
			tt.edit(&cfg)
			store, err := objstore.New(cfg)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if store.Bucket() != cfg.Bucket {
					t.Fatalf("Bucket() = %q, want %q", store.Bucket(), cfg.Bucket)
				}
				return
			}
			if err == nil {
				t.Fatalf("New accepted %+v, want errors %q", cfg, tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q, want it to contain %q", err, want)
				}
			}
		})
	}
}
