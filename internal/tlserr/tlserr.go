// Package tlserr recognises the TLS failures that retrying does not mend, for every adapter and
// the failure table to ask the same question the same way.
package tlserr

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// IsSetup reports whether err, or an error it wraps, is a TLS set-up failure: a certificate
// refused (an unknown authority, a name it does not cover, one invalid or failing
// verification) or a server that does not answer in TLS where TLS was asked for (its first
// bytes are no TLS record). Either stays as it is until the operator changes the trust or the
// address. (net/http reports a plain HTTP answer to https in words only, which this leaves.)
func IsSetup(err error) bool {
	var verify *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var badHost x509.HostnameError
	var badCert x509.CertificateInvalidError
	var notTLS tls.RecordHeaderError
	return errors.As(err, &verify) || errors.As(err, &unknownCA) || errors.As(err, &badHost) ||
		errors.As(err, &badCert) || errors.As(err, &notTLS)
}
