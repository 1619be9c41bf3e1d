package openai

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		wantOK bool
	}{
		{"absent", nil, 0, false},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second, true},
		{"zero seconds", map[string]string{"Retry-After": "0"}, 0, true},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond, true},
		{"negative seconds", map[string]string{"Retry-After": "-3"}, 0, false},
		{"HTTP-date ahead", map[string]string{"Retry-After": "Sat, 01 Mar 2025 12:00:20 GMT"}, 20 * time.Second, true},
		{"HTTP-date past", map[string]string{"Retry-After": "Sat, 01 Mar 2025 11:59:00 GMT"}, 0, true},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, false},
		{"milliseconds", map[string]string{"retry-after-ms": "120"}, 120 * time.Millisecond, true},
		{"milliseconds win", map[string]string{"retry-after-ms": "120", "Retry-After": "9"}, 120 * time.Millisecond, true},
		{"bad milliseconds fall back", map[string]string{"retry-after-ms": "x", "Retry-After": "9"}, 9 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			got, ok := retryAfter(h, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("retryAfter(%v) = %v, %v; want %v, %v", tt.header, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
