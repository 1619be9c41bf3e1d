package objstore

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/minio/minio-go/v7"
)

func TestTemporary(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"not found", &OpError{Op: "get", Err: errors.New("NoSuchKey"), kind: ErrNotFound}, false},
		{"refused", &OpError{Op: "get", Err: minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403}}, false},
		{"unavailable", &OpError{Op: "get", Err: minio.ErrorResponse{Code: "ServiceUnavailable", StatusCode: 503}}, true},
		{"connection refused", &OpError{Op: "get", Err: syscall.ECONNREFUSED}, true},
		{"bad uri", errors.New("objstore: bucket not allowed"), false},
		{"deadline", context.DeadlineExceeded, true},
	}
	for _, tt := range tests {
		if got := Temporary(tt.err); got != tt.want {
			t.Errorf("%s: Temporary = %v, want %v", tt.name, got, tt.want)
		}
	}
}
