package auth

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"rulevalidator/internal/logbuf"
)

const internalToken = "9f1c2e7a4b8d6f03a5c7e9b1d3f5a7c9"

func TestNewStaticToken(t *testing.T) {
	tests := []struct {
		name, token, wantErr string
	}{
		{"32 bytes", internalToken, ""},
		{"31 bytes", internalToken[:31], "static token has 31 bytes, fewer than the 32 required"},
		{"empty", "", "static token has 0 bytes"},
		{"trailing newline", internalToken + "\n", "surrounding whitespace"},
		{"leading space", " " + internalToken, "surrounding whitespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewStaticToken(tt.token)
			if tt.wantErr == "" {
				if err != nil || s == nil {
					t.Fatalf("NewStaticToken = %v, %v", s, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewStaticToken error = %v, want %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), strings.TrimSpace(tt.token)) && tt.token != "" {
				t.Errorf("error %q echoes the token", err)
			}
		})
	}
}

func TestStaticTokenVerify(t *testing.T) {
	s, err := NewStaticToken(internalToken)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, token string
		ok          bool
	}{
		{"same", internalToken, true},
		{"empty", "", false},
		{"prefix", internalToken[:16], false},
		{"longer", internalToken + "0", false},
		{"last byte differs", internalToken[:31] + "0", false},
		{"different case", strings.ToUpper(internalToken), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Verify(tt.token)
			if tt.ok {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("Verify = %v, want ErrUnauthorized", err)
			}
		})
	}
}

func TestStaticTokenIsRedacted(t *testing.T) {
	s, err := NewStaticToken(internalToken)
	if err != nil {
		t.Fatal(err)
	}
	var logs logbuf.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("configured", "internal_token", s)
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %+v %s %#v", s, s, s, s), logs.String()} {
		if !strings.Contains(out, "redacted") || strings.Contains(out, internalToken) {
			t.Errorf("printed as %q, want it redacted", out)
		}
	}
}

func ExampleStaticToken() {
	internal, err := NewStaticToken("9f1c2e7a4b8d6f03a5c7e9b1d3f5a7c9")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(internal.Verify("9f1c2e7a4b8d6f03a5c7e9b1d3f5a7c9"))
	err = internal.Verify("guess")
	fmt.Println(errors.Is(err, ErrUnauthorized), err)
	// Output:
	// <nil>
	// true unauthorized: static token does not match
}
