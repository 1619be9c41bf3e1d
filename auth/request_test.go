package auth

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestFromRequest(t *testing.T) {
	tests := []struct {
		name    string
		headers []string
		want    string // the token, when wantErr is empty
		wantErr string
	}{
		{"bearer", []string{"Bearer abc.def.ghi"}, "abc.def.ghi", ""},
		{"lower-case scheme", []string{"bearer abc.def.ghi"}, "abc.def.ghi", ""},
		{"upper-case scheme", []string{"BEARER abc.def.ghi"}, "abc.def.ghi", ""},
		{"extra spaces after scheme", []string{"Bearer   abc.def.ghi"}, "abc.def.ghi", ""},
		{"missing", nil, "", "no Authorization header"},
		{"empty", []string{""}, "", "empty Authorization header"},
		{"basic", []string{"Basic dXNlcjpwYXNz"}, "", "scheme is not Bearer"},
		{"scheme only", []string{"Bearer"}, "", "Bearer token is empty"},
		{"scheme and space", []string{"Bearer "}, "", "Bearer token is empty"},
		{"token without scheme", []string{"abc.def.ghi"}, "", "scheme is not Bearer"},
		{"scheme glued to token", []string{"Bearerabc.def.ghi"}, "", "scheme is not Bearer"},
		{"two tokens", []string{"Bearer abc def"}, "", "holds whitespace"},
		{"two headers", []string{"Bearer abc", "Bearer def"}, "", "2 Authorization headers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/v1/verdicts?access_token=ignored", nil)
			for _, h := range tt.headers {
				r.Header.Add("Authorization", h)
			}
			got, err := FromRequest(r)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("FromRequest = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("FromRequest = %q, %v; want an ErrUnauthorized saying %q", got, err, tt.wantErr)
			}
			if got != "" {
				t.Errorf("token %q returned with an error", got)
			}
		})
	}
}

func TestFromRequestMissingHeaderIsErrNoToken(t *testing.T) {
	_, err := FromRequest(httptest.NewRequest("GET", "/", nil))
	if !errors.Is(err, ErrNoToken) || !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("err = %v, want ErrNoToken wrapping ErrUnauthorized", err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Basic x")
	if _, err := FromRequest(r); errors.Is(err, ErrNoToken) {
		t.Fatalf("a malformed header reported as no header: %v", err)
	}
}
