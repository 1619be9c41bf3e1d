package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"rulevalidator/internal/logbuf"
)

// jwksFixture is a verifier reading keys from a test JWKS server.
type jwksFixture struct {
	clock    *fakeClock
	logs     *logbuf.Buffer
	server   *jwksServer
	verifier *Verifier
}

func newJWKSFixture(t *testing.T, keys ...map[string]any) jwksFixture {
	t.Helper()
	f := jwksFixture{clock: newFakeClock(), logs: &logbuf.Buffer{}, server: newJWKSServer(t, keys...)}
	cfg := baseConfig(f.clock, f.logs)
	cfg.JWKSURL = f.server.URL
	f.verifier = newVerifier(t, cfg)
	return f
}

func (f jwksFixture) verify(t *testing.T, k testKey) error {
	t.Helper()
	_, err := f.verifier.Verify(context.Background(), mint(t, k, validClaims(f.clock.Now())))
	return err
}

func TestJWKSAcceptsEachKeyType(t *testing.T) {
	rsaKey, ecKey, edKey := newRSAKey(t, "rsa-1", 2048), newECKey(t, "ec-1"), newEdKey(t, "ed-1")
	f := newJWKSFixture(t, jwk(t, rsaKey, nil), jwk(t, ecKey, map[string]any{"alg": "ES256"}), jwk(t, edKey, map[string]any{"use": nil}))
	for _, k := range []testKey{rsaKey, ecKey, edKey} {
		if err := f.verify(t, k); err != nil {
			t.Errorf("%s token: %v", k.method.Alg(), err)
		}
	}
	if got := f.server.hitCount(); got != 1 {
		t.Errorf("JWKS fetched %d times, want 1", got)
	}
}

func TestJWKSIgnoresUnusableKeys(t *testing.T) {
	good := newEdKey(t, "good")
	enc := newEdKey(t, "enc")
	ops := newEdKey(t, "ops")
	pinned := newEdKey(t, "pinned")
	small := newRSAKey(t, "small", 1024)
	noKid := newEdKey(t, "")
	f := newJWKSFixture(t,
		jwk(t, good, nil),
		jwk(t, enc, map[string]any{"use": "enc"}),
		jwk(t, ops, map[string]any{"key_ops": []string{"encrypt"}}),
		jwk(t, pinned, map[string]any{"alg": "RS256"}),
		jwk(t, small, nil),
		jwk(t, noKid, nil),
		map[string]any{"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
		map[string]any{"kty": "EC", "kid": "off-curve", "crv": "P-256", "x": b64(make([]byte, 32)), "y": b64(make([]byte, 32))},
	)
	if err := f.verify(t, good); err != nil {
		t.Fatalf("token with the usable key: %v", err)
	}
	for _, k := range []testKey{enc, ops, pinned, small} {
		err := f.verify(t, k)
		if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "unknown kid") {
			t.Errorf("token with kid %q: err = %v, want unknown kid", k.kid, err)
		}
	}
	logs := f.logs.String()
	for _, want := range []string{
		`use is \"enc\", not \"sig\"`,
		`key_ops [encrypt] lacks \"verify\"`,
		`Ed25519 key cannot verify its own alg \"RS256\"`,
		"RSA key has 1024 bits, fewer than the 2048 required",
		"no kid",
		`kty \"oct\" is not supported`,
		"P-256 point",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs do not explain %q:\n%s", want, logs)
		}
	}
}

func TestJWKSPinnedAlgMustMatch(t *testing.T) {
	// An RSA key fits RS256 and PS256 alike; a JWK pinning RS256 must not
	// verify a PS256 token.
	key := newRSAKey(t, "rsa-1", 2048)
	srv := newJWKSServer(t, jwk(t, key, map[string]any{"alg": "RS256"}))
	clock := newFakeClock()
	cfg := baseConfig(clock, &logbuf.Buffer{})
	cfg.JWKSURL = srv.URL
	cfg.Algorithms = []string{"RS256", "PS256"}
	v := newVerifier(t, cfg)

	if _, err := v.Verify(context.Background(), mint(t, key, validClaims(clock.Now()))); err != nil {
		t.Fatalf("RS256 token: %v", err)
	}
	pss := key
	pss.method = jwt.SigningMethodPS256
	_, err := v.Verify(context.Background(), mint(t, pss, validClaims(clock.Now())))
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), `token alg PS256 differs from alg RS256 pinned by kid "rsa-1"`) {
		t.Fatalf("PS256 token: err = %v, want the pinned alg enforced", err)
	}
}

func TestJWKSRotationOnUnknownKidIsRateLimited(t *testing.T) {
	oldKey, newKey, newerKey := newEdKey(t, "2026-01"), newECKey(t, "2026-02"), newRSAKey(t, "2026-03", 2048)
	f := newJWKSFixture(t, jwk(t, oldKey, nil))

	f.server.setKeys(t, jwk(t, oldKey, nil), jwk(t, newKey, nil))
	f.clock.Advance(10 * time.Second)
	// The initial fetch was 10s ago: the unknown kid may not trigger another.
	if err := f.verify(t, newKey); err == nil || !strings.Contains(err.Error(), "JWKS refetch skipped") {
		t.Fatalf("new kid within the rate limit: err = %v, want refetch skipped", err)
	}
	if got := f.server.hitCount(); got != 1 {
		t.Fatalf("JWKS fetched %d times within the rate limit, want 1", got)
	}

	f.clock.Advance(MinJWKSRefetch)
	if err := f.verify(t, newKey); err != nil {
		t.Fatalf("new kid after the rate limit: %v", err)
	}
	if got := f.server.hitCount(); got != 2 {
		t.Fatalf("JWKS fetched %d times, want 2", got)
	}
	if err := f.verify(t, oldKey); err != nil {
		t.Errorf("old kid still served: %v", err)
	}

	// A made-up kid right after the refetch costs no request.
	if err := f.verify(t, newEdKey(t, "made-up")); err == nil {
		t.Fatal("made-up kid accepted")
	}
	f.server.setKeys(t, jwk(t, newKey, nil), jwk(t, newerKey, nil))
	if err := f.verify(t, newerKey); err == nil {
		t.Fatal("kid published within the rate limit accepted before a refetch")
	}
	if got := f.server.hitCount(); got != 2 {
		t.Fatalf("JWKS fetched %d times, want still 2", got)
	}

	f.clock.Advance(MinJWKSRefetch)
	if err := f.verify(t, newerKey); err != nil {
		t.Fatalf("newer kid after the rate limit: %v", err)
	}
	// The refetch dropped the old key.
	if err := f.verify(t, oldKey); err == nil || !strings.Contains(err.Error(), "unknown kid") {
		t.Fatalf("removed kid: err = %v, want unknown kid", err)
	}
}

func TestJWKSUnknownKidRefetchIsShared(t *testing.T) {
	oldKey, newKey := newEdKey(t, "old"), newEdKey(t, "new")
	f := newJWKSFixture(t, jwk(t, oldKey, nil))
	f.server.setKeys(t, jwk(t, oldKey, nil), jwk(t, newKey, nil))
	f.clock.Advance(MinJWKSRefetch)

	token := mint(t, newKey, validClaims(f.clock.Now()))
	const callers = 16
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			_, errs[i] = f.verifier.Verify(context.Background(), token)
		})
	}
	wg.Wait()
	// Callers join the one refetch in flight, or find its result.
	if got := f.server.hitCount(); got != 2 {
		t.Fatalf("JWKS fetched %d times for %d concurrent callers, want 2", got, callers)
	}
	if err := f.verify(t, newKey); err != nil {
		t.Fatalf("new kid after the shared refetch: %v", err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
}

func TestJWKSPeriodicRefresh(t *testing.T) {
	oldKey, newKey := newEdKey(t, "old"), newEdKey(t, "new")
	f := newJWKSFixture(t, jwk(t, oldKey, nil))
	f.server.setKeys(t, jwk(t, newKey, nil)) // old key revoked

	f.clock.Advance(DefaultJWKSRefresh - time.Second)
	if err := f.verify(t, oldKey); err != nil {
		t.Fatalf("before the refresh period: %v", err)
	}
	if got := f.server.hitCount(); got != 1 {
		t.Fatalf("JWKS fetched %d times before the refresh period, want 1", got)
	}

	f.clock.Advance(time.Second)
	// This call starts the refresh in the background and, the JWKS server
	// being slow, is served from the cache meanwhile.
	release := f.server.stall()
	if err := f.verify(t, oldKey); err != nil {
		t.Fatalf("call that starts the refresh: %v", err)
	}
	release()
	waitForFetches(f.verifier)
	if got := f.server.hitCount(); got != 2 {
		t.Fatalf("JWKS fetched %d times after the refresh period, want 2", got)
	}
	if err := f.verify(t, oldKey); err == nil || !strings.Contains(err.Error(), "unknown kid") {
		t.Fatalf("revoked kid after the refresh: err = %v, want unknown kid", err)
	}
}

func TestJWKSEndpointDownKeepsCachedKeys(t *testing.T) {
	key := newEdKey(t, "k1")
	f := newJWKSFixture(t, jwk(t, key, nil))

	for _, outage := range []struct {
		name  string
		start func()
	}{
		{"HTTP 503", func() { f.server.setStatus(http.StatusServiceUnavailable) }},
		{"empty key set", func() { f.server.setStatus(http.StatusOK); f.server.setKeys(t) }},
		{"server gone", func() { f.server.Close() }},
	} {
		t.Run(outage.name, func(t *testing.T) {
			outage.start()
			f.clock.Advance(DefaultJWKSRefresh)
			if err := f.verify(t, key); err != nil {
				t.Fatalf("cached key during the outage: %v", err)
			}
			waitForFetches(f.verifier)
			if err := f.verify(t, key); err != nil {
				t.Fatalf("cached key after the failed refresh: %v", err)
			}
			// An unknown kid finds no key: the refetch it starts, or the
			// periodic one it joins, fails too.
			f.clock.Advance(MinJWKSRefetch)
			if err := f.verify(t, newEdKey(t, "k2")); err == nil || !strings.Contains(err.Error(), `unknown kid "k2"`) {
				t.Fatalf("unknown kid during the outage: err = %v", err)
			}
		})
	}
	if !strings.Contains(f.logs.String(), "JWKS refresh failed; keeping cached keys") {
		t.Errorf("failed refreshes not logged:\n%s", f.logs)
	}
}

func TestJWKSUnknownKidWaitHonoursContext(t *testing.T) {
	key := newEdKey(t, "k1")
	f := newJWKSFixture(t, jwk(t, key, nil))
	release := f.server.stall()
	t.Cleanup(release)
	f.clock.Advance(MinJWKSRefetch)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := f.verifier.Verify(ctx, mint(t, newEdKey(t, "k2"), validClaims(f.clock.Now())))
	if !errors.Is(err, ErrUnauthorized) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrUnauthorized wrapping the deadline", err)
	}
}

func TestPEMKeyWinsOverJWKSKid(t *testing.T) {
	pemKey, jwksKey := newEdKey(t, "shared"), newEdKey(t, "shared")
	srv := newJWKSServer(t, jwk(t, jwksKey, nil))
	logs := &logbuf.Buffer{}
	cfg := baseConfig(newFakeClock(), logs)
	cfg.JWKSURL = srv.URL
	cfg.PEMFiles = []string{writePEM(t, t.TempDir(), pemKey)}
	v := newVerifier(t, cfg)

	now := cfg.Now()
	if _, err := v.Verify(context.Background(), mint(t, pemKey, validClaims(now))); err != nil {
		t.Fatalf("PEM key: %v", err)
	}
	if _, err := v.Verify(context.Background(), mint(t, jwksKey, validClaims(now))); err == nil {
		t.Fatal("JWKS key accepted under a kid a PEM file holds")
	}
	if !strings.Contains(logs.String(), "the PEM key wins") {
		t.Errorf("kid collision not logged:\n%s", logs)
	}
}
