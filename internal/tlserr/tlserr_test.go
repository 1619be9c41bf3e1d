package tlserr_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"syscall"
	"testing"

	"rulevalidator/internal/tlserr"
)

func TestIsSetup(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"unknown authority", x509.UnknownAuthorityError{}, true},
		{"host name", fmt.Errorf("get: %w", x509.HostnameError{Host: "example.com", Certificate: &x509.Certificate{}}), true},
		{"invalid certificate", x509.CertificateInvalidError{Reason: x509.Expired}, true},
		{"verification", &url.Error{Op: "Post", URL: "https://x", Err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}}, true},
		{"not TLS", fmt.Errorf("dial: %w", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), true},
		{"connection refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, false},
		{"deadline", context.DeadlineExceeded, false},
		{"nil", nil, false},
		{"plain", errors.New("x509: said in words only"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tlserr.IsSetup(tt.err); got != tt.want {
				t.Errorf("IsSetup(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestIsSetupOnRealHandshakes: what net/http returns for an untrusted certificate and for a
// server that answers in something other than TLS.
func TestIsSetupOnRealHandshakes(t *testing.T) {
	untrusted := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer untrusted.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n"))
			c.Close()
		}
	}()
	for name, url := range map[string]string{
		"untrusted certificate": untrusted.URL,
		"not TLS":               "https://" + ln.Addr().String(),
	} {
		t.Run(name, func(t *testing.T) {
			resp, err := http.Get(url)
			if err == nil {
				resp.Body.Close()
				t.Fatal("the request succeeded")
			}
			if !tlserr.IsSetup(err) {
				t.Errorf("IsSetup(%v) = false", err)
			}
		})
	}
}
