package objstore

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7/pkg/s3utils"
	"go.opentelemetry.io/otel/trace"
)

// Defaults applied by New to the zero fields of Config.
const (
	DefaultMaxAttempts    = 4
	DefaultBaseDelay      = 200 * time.Millisecond
	DefaultMaxObjectBytes = 64 << 20
	DefaultRegion         = "us-east-1"
	// DefaultClaimsPrefix is where upstream pipelines store the documents their requests name
	// by uri: s3://<bucket>/claims/<tenant>/<any name>.
	DefaultClaimsPrefix = "claims"
)

// Config says where the object store is and how to talk to it. Zero fields take the defaults
// named on each field.
type Config struct {
	// Endpoint is host:port (for example 127.0.0.1:7070) or a URL (http://host:port,
	// https://host). A URL's scheme decides TLS; it must not contradict UseTLS.
	Endpoint string
	// AccessKey and SecretKey are the static credentials. Both are required.
	AccessKey string
	SecretKey string
	// Bucket is the bucket every key lives in.
	Bucket string
	// AllowedBuckets are further buckets GetClaim may read claim-check documents from. The
	// configured Bucket is always allowed; any other bucket in a URI is refused, so that a
	// request can't make the service read arbitrary buckets.
	AllowedBuckets []string
	// ClaimsPrefix is the key prefix under which, in every bucket claim checks are read
	// from, each tenant's documents are kept: <ClaimsPrefix>/<tenant>/..., the tenant
	// escaped with KeySegment (default DefaultClaimsPrefix). A claim check naming any other
	// key, the service's own state or another tenant's documents, is refused unread.
	ClaimsPrefix string
	// UseTLS talks HTTPS to a host:port endpoint.
	UseTLS bool
	// Region is signed into every request (default us-east-1). Setting it also spares a
	// bucket-location round trip before the first request.
	Region string
	// MaxAttempts caps the attempts of each call, the first one included (default 4).
	// Only transient failures are retried: network errors, 5xx, throttling.
	MaxAttempts int
	// BaseDelay is the backoff before the second attempt; it doubles for every further
	// attempt, with jitter, up to maxBackoff (default 200ms).
	BaseDelay time.Duration
	// MaxObjectBytes caps what GetBytes reads into memory (default 64 MiB).
	MaxObjectBytes int64
	// Transport carries the HTTP requests (default: minio-go's transport). Set it for a
	// private certificate authority or a proxy.
	Transport http.RoundTripper
	// Logger receives a warning for every retried failure (default: discard).
	Logger *slog.Logger
	// TracerProvider makes a CLIENT span per object operation (see trace.go);
	// nil makes none.
	TracerProvider trace.TracerProvider
}

func (c *Config) setDefaults() {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.BaseDelay == 0 {
		c.BaseDelay = DefaultBaseDelay
	}
	if c.MaxObjectBytes == 0 {
		c.MaxObjectBytes = DefaultMaxObjectBytes
	}
	if c.Region == "" {
		c.Region = DefaultRegion
	}
	if c.ClaimsPrefix == "" {
		c.ClaimsPrefix = DefaultClaimsPrefix
	}
	c.ClaimsPrefix = strings.TrimSuffix(c.ClaimsPrefix, "/")
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem with the configuration at once.
func (c *Config) Validate() error {
	var errs []error
	if _, _, err := c.endpoint(); err != nil {
		errs = append(errs, err)
	}
	if c.AccessKey == "" {
		errs = append(errs, errors.New("AccessKey is empty"))
	}
	if c.SecretKey == "" {
		errs = append(errs, errors.New("SecretKey is empty"))
	}
	if c.Bucket == "" {
		errs = append(errs, errors.New("Bucket is empty"))
	} else if err := s3utils.CheckValidBucketNameStrict(c.Bucket); err != nil {
		errs = append(errs, fmt.Errorf("Bucket %q: %v", c.Bucket, err))
	}
	for i, b := range c.AllowedBuckets {
		if err := s3utils.CheckValidBucketNameStrict(b); err != nil {
			errs = append(errs, fmt.Errorf("AllowedBuckets[%d] %q: %v", i, b, err))
		}
	}
	if err := checkPrefix(c.ClaimsPrefix); err != nil {
		errs = append(errs, fmt.Errorf("ClaimsPrefix: %v", err))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("MaxAttempts is %d, want 1 or more (0 means %d)", c.MaxAttempts, DefaultMaxAttempts))
	}
	if c.BaseDelay < 0 {
		errs = append(errs, fmt.Errorf("BaseDelay is %s, want a positive duration (0 means %s)", c.BaseDelay, DefaultBaseDelay))
	}
	if c.MaxObjectBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxObjectBytes is %d, want a positive size (0 means %d)", c.MaxObjectBytes, DefaultMaxObjectBytes))
	}
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return fmt.Errorf("objstore config: %s", strings.Join(msgs, "; "))
}

// endpoint splits Endpoint into the host[:port] minio-go wants and whether to use TLS.
func (c *Config) endpoint() (host string, secure bool, err error) {
	ep := strings.TrimSpace(c.Endpoint)
	if ep == "" {
		return "", false, errors.New("the Endpoint is empty")
	}
	if !strings.Contains(ep, "://") {
		if strings.ContainsAny(ep, "/?#") {
			return "", false, fmt.Errorf("the Endpoint %q: want host:port or a URL such as http://host:port", c.Endpoint)
		}
		if err := checkHostPort(ep); err != nil {
			return "", false, fmt.Errorf("the Endpoint %q: %v", c.Endpoint, err)
		}
		return ep, c.UseTLS, nil
	}
	u, err := url.Parse(ep)
	if err != nil {
		return "", false, fmt.Errorf("the Endpoint %q: %v", c.Endpoint, err)
	}
	switch u.Scheme {
	case "https":
		secure = true
	case "http":
		if c.UseTLS {
			return "", false, fmt.Errorf("the Endpoint %q is plain http but UseTLS is set", c.Endpoint)
		}
	default:
		return "", false, fmt.Errorf("the Endpoint %q: scheme %q, want http or https", c.Endpoint, u.Scheme)
	}
	if u.Host == "" {
		return "", false, fmt.Errorf("the Endpoint %q has no host", c.Endpoint)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", false, fmt.Errorf("the Endpoint %q: want scheme://host[:port] only, without user, path, query or fragment", c.Endpoint)
	}
	if err := checkHostPort(u.Host); err != nil {
		return "", false, fmt.Errorf("the Endpoint %q: %v", c.Endpoint, err)
	}
	return u.Host, secure, nil
}

// checkHostPort accepts host or host:port, the port being a number from 1 to 65535.
func checkHostPort(hp string) error {
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		// No port: the scheme's default applies.
		if strings.Contains(hp, ":") && !strings.HasPrefix(hp, "[") {
			return err
		}
		host = hp
	} else {
		n, convErr := strconv.Atoi(port)
		if convErr != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return fmt.Errorf("port %q is not a number from 1 to 65535", port)
		}
	}
	if host == "" {
		return errors.New("host is empty")
	}
	return nil
}
