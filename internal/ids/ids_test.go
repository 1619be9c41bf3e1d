package ids

import "testing"

func TestCheckTraceparent(t *testing.T) {
	for _, tc := range []struct {
		in    string
		valid bool
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false}, // upper case
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false}, // zero trace id
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false}, // zero parent id
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false}, // forbidden version
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", false},
		{"trace-me", false},
	} {
		if err := CheckTraceparent(tc.in); (err == nil) != tc.valid {
			t.Errorf("CheckTraceparent(%q) = %v, want valid %v", tc.in, err, tc.valid)
		}
	}
	for range 20 {
		if tp := NewTraceparent(); CheckTraceparent(tp) != nil {
			t.Errorf("generated traceparent %q is invalid: %v", tp, CheckTraceparent(tp))
		}
	}
}
