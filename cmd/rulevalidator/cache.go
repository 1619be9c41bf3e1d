package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"rulevalidator/engine"
	"rulevalidator/objstore"
	"rulevalidator/verdictcache"
)

// s3Config is how a command reaches object storage.
type s3Config struct {
	// tracer makes the object store's spans (not a setting: serve sets
	// it); nil makes none.
	tracer trace.TracerProvider

	endpoint  string
	accessKey string
	secretKey string
	bucket    string
	tls       bool
	maxObject int
	// claimsPrefix is where each tenant's claim-checked documents are kept
	// (serve's setting; the default for other commands).
	claimsPrefix string
}

// s3Settings binds the object storage settings.
func s3Settings(s *settings, c *s3Config) {
	s.section("Object storage")
	s.str(&c.endpoint, "s3-endpoint", "S3_ENDPOINT", "", "S3-compatible endpoint (host:port) for reports, documents by uri and the verdict cache; empty disables the first two and keeps the verdict cache in memory")
	s.secret(&c.accessKey, "s3-access-key", "S3_ACCESS_KEY", "S3 access key")
	s.secret(&c.secretKey, "s3-secret-key", "S3_SECRET_KEY", "S3 secret key")
	s.str(&c.bucket, "s3-bucket", "S3_BUCKET", "rulevalidator-reports", "bucket for reports, claim-checked documents, job status and the verdict cache")
	s.boolean(&c.tls, "s3-tls", "S3_TLS", "false", "use HTTPS for S3")
	s.integer(&c.maxObject, "s3-max-object-bytes", "S3_MAX_OBJECT_BYTES", strconv.Itoa(objstore.DefaultMaxObjectBytes), "largest document read from object storage")
}

func (c *s3Config) check() error {
	if c.endpoint != "" && (c.accessKey == "" || c.secretKey == "") {
		return errors.New("--s3-endpoint is set but --s3-access-key or --s3-secret-key is empty")
	}
	return nil
}

// store is the object store the settings name; nil without --s3-endpoint.
func (c *s3Config) store(logger *slog.Logger) (*objstore.Store, error) {
	if c.endpoint == "" {
		return nil, nil
	}
	return objstore.New(objstore.Config{
		Endpoint: c.endpoint, AccessKey: c.accessKey, SecretKey: c.secretKey,
		Bucket: c.bucket, UseTLS: c.tls, MaxObjectBytes: int64(c.maxObject), ClaimsPrefix: c.claimsPrefix, Logger: logger,
		TracerProvider: c.tracer,
	})
}

// openForCommand is the object store of a one-off command, checked, with a
// logger of its warnings on stderr.
func (c *s3Config) openForCommand(stderr io.Writer) (*objstore.Store, *slog.Logger, error) {
	if err := c.check(); err != nil {
		return nil, nil, err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := c.store(logger)
	return store, logger, err
}

// verdictCacheConfig is serve's verdict cache.
type verdictCacheConfig struct {
	enabled       bool
	ttl           time.Duration
	maxEntryBytes int
	prefix        string
	entries       int
}

// verdictCacheSettings binds the verdict cache's settings.
func verdictCacheSettings(s *settings, c *verdictCacheConfig) {
	s.section("Verdict cache")
	s.boolean(&c.enabled, "verdict-cache", "RULEVALIDATOR_VERDICT_CACHE", "true", "take the verdict of a rule judged before on the same material, with the same model and settings, for the same tenant, from the verdict cache instead of asking the model; in object storage with --s3-endpoint (shared by replicas, kept across restarts), else in memory")
	s.duration(&c.ttl, "verdict-cache-ttl", "RULEVALIDATOR_VERDICT_CACHE_TTL", (verdictcache.DefaultTTL).String(), "how long a cached verdict is reused after it was judged; set the bucket's lifecycle rule for --verdict-cache-prefix to at least this")
	s.integer(&c.maxEntryBytes, "verdict-cache-max-entry-bytes", "RULEVALIDATOR_VERDICT_CACHE_MAX_ENTRY_BYTES", fmt.Sprint(verdictcache.DefaultMaxEntryBytes), "largest verdict stored in the verdict cache; a larger one is asked again next time")
	verdictCachePrefixSetting(s, &c.prefix)
	s.integer(&c.entries, "verdict-cache-entries", "RULEVALIDATOR_VERDICT_CACHE_ENTRIES", fmt.Sprint(verdictcache.DefaultMemoryEntries), "verdicts kept in memory when there is no object storage")
}

// verdictCachePrefixSetting is where the verdict cache's entries are kept.
func verdictCachePrefixSetting(s *settings, p *string) {
	s.str(p, "verdict-cache-prefix", "RULEVALIDATOR_VERDICT_CACHE_PREFIX", verdictcache.DefaultPrefix, "object key prefix of the verdict cache's entries (<prefix>/<tenant>/<ruleset id>/<key>.json)")
}

func (c *verdictCacheConfig) check() error {
	var errs []error
	if c.ttl <= 0 {
		errs = append(errs, fmt.Errorf("--verdict-cache-ttl: %s must be positive", c.ttl))
	}
	if c.maxEntryBytes < 1 {
		errs = append(errs, fmt.Errorf("--verdict-cache-max-entry-bytes: %d must be positive", c.maxEntryBytes))
	}
	if c.entries < 1 {
		errs = append(errs, fmt.Errorf("--verdict-cache-entries: %d must be positive", c.entries))
	}
	return errors.Join(errs...)
}

// open is the verdict cache the settings describe: in store when there is
// one, else in memory; nil when it is off.
func (c *verdictCacheConfig) open(store *objstore.Store, logger *slog.Logger) (engine.VerdictCache, error) {
	if !c.enabled {
		logger.Info("the verdict cache is off (--verdict-cache=false): every rule of every request is asked of the model")
		return nil, nil
	}
	policy := verdictcache.Policy{TTL: c.ttl, MaxEntryBytes: c.maxEntryBytes}
	if store == nil {
		logger.Info("the verdict cache is kept in memory: per replica and lost on restart; set --s3-endpoint to share it and keep it", "entries", c.entries)
		return verdictcache.NewMemory(verdictcache.MemoryConfig{Policy: policy, Entries: c.entries})
	}
	cache, err := verdictcache.NewObjectStore(store, verdictcache.ObjectStoreConfig{Policy: policy, Prefix: c.prefix, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("--verdict-cache-prefix: %w", err)
	}
	return cache, nil
}

// cachePurgeSettings are the settings of cache purge: where the entries are.
func cachePurgeSettings(c *s3Config, prefix *string) *settings {
	s := &settings{}
	s3Settings(s, c)
	s.section("Verdict cache")
	verdictCachePrefixSetting(s, prefix)
	return s
}

// cachePurgeDoc is cache purge's --help.
var cachePurgeDoc = commandDoc{
	synopsis: "cache purge --tenant T [--ruleset R] [settings]",
	about: []string{
		"Deletes a tenant's entries from the verdict cache in object storage, or only those of one ruleset id, " +
			"so that their rules are asked of the model again. A running service's in-memory cache (without " +
			"--s3-endpoint) is not reached; restart it instead.",
	},
	exit:     "0 purged, 2 invalid flags or settings, 1 object storage failed (part of the entries may be gone).",
	examples: []string{"rulevalidator cache purge --tenant contoso --ruleset contract-review"},
}

func runCache(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	if len(args) == 0 || args[0] != "purge" {
		if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stdout, "usage: rulevalidator cache purge --tenant T [--ruleset R] [settings]")
			return exitOK
		}
		fmt.Fprintln(stderr, "usage: rulevalidator cache purge --tenant T [--ruleset R] [settings]")
		return exitInvalid
	}
	var (
		s3     s3Config
		prefix string
	)
	cl := newCommandLine("cache purge", cachePurgeDoc, cachePurgeSettings(&s3, &prefix), stderr)
	var (
		tenant  = cl.fs.String("tenant", "", "the tenant whose entries are deleted (required)")
		ruleset = cl.fs.String("ruleset", "", "only the entries of this ruleset id")
		timeout = cl.fs.Duration("timeout", 5*time.Minute, "bound on the purge")
	)
	if code, ok := cl.parse(args[1:], getenv); !ok {
		return code
	}
	switch {
	case *tenant == "":
		fmt.Fprintln(stderr, "cache purge: --tenant is required")
		return exitInvalid
	case s3.endpoint == "":
		fmt.Fprintln(stderr, "cache purge: --s3-endpoint is required: the verdict cache to purge is in object storage")
		return exitInvalid
	case *timeout <= 0:
		fmt.Fprintf(stderr, "cache purge: --timeout: %s must be positive\n", *timeout)
		return exitInvalid
	}
	store, logger, err := s3.openForCommand(stderr)
	if err != nil {
		return cl.invalid(err)
	}
	cache, err := verdictcache.NewObjectStore(store, verdictcache.ObjectStoreConfig{Prefix: prefix, Logger: logger})
	if err != nil {
		return cl.invalid(err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	n, err := cache.Purge(ctx, *tenant, *ruleset)
	what := fmt.Sprintf("tenant %q", *tenant)
	if *ruleset != "" {
		what += fmt.Sprintf(", ruleset %q", *ruleset)
	}
	if err != nil {
		fmt.Fprintf(stderr, "cache purge: %s: deleted %d entries, then: %v\n", what, n, err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "deleted %d verdict cache entries of %s\n", n, what)
	return exitOK
}
