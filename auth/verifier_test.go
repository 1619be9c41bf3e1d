package auth

import (
	"context"
	"crypto/x509"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"rulevalidator/internal/logbuf"
)

// pemFixture is a verifier holding one RSA, one ECDSA P-256 and one Ed25519 key
// from PEM files written for the test.
type pemFixture struct {
	clock       *fakeClock
	rsa, ec, ed testKey
	verifier    *Verifier
}

func newPEMFixture(t *testing.T, mutate func(*Config)) pemFixture {
	t.Helper()
	f := pemFixture{
		clock: newFakeClock(),
		rsa:   newRSAKey(t, "rsa-1", 2048),
		ec:    newECKey(t, "ec-1"),
		ed:    newEdKey(t, "ed-1"),
	}
	dir := t.TempDir()
	cfg := baseConfig(f.clock, &logbuf.Buffer{})
	cfg.PEMFiles = []string{writePEM(t, dir, f.rsa), writePEM(t, dir, f.ec), writePEM(t, dir, f.ed)}
	if mutate != nil {
		mutate(&cfg)
	}
	f.verifier = newVerifier(t, cfg)
	return f
}

func TestVerifyAcceptsEachKeyType(t *testing.T) {
	f := newPEMFixture(t, nil)
	now := f.clock.Now()
	for _, k := range []testKey{f.rsa, f.ec, f.ed} {
		t.Run(k.method.Alg(), func(t *testing.T) {
			got, err := f.verifier.Verify(context.Background(), mint(t, k, validClaims(now)))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			want := Principal{
				Subject:   "user-17",
				Tenant:    testTenant,
				Issuer:    testIssuer,
				Scopes:    []string{"rules:read", "verdicts:read"},
				ExpiresAt: time.Unix(now.Add(time.Hour).Unix(), 0),
			}
			if got.Subject != want.Subject || got.Tenant != want.Tenant || got.Issuer != want.Issuer ||
				!slices.Equal(got.Scopes, want.Scopes) || !got.ExpiresAt.Equal(want.ExpiresAt) {
				t.Errorf("Principal = %+v, want %+v", got, want)
			}
		})
	}
}

func TestVerifyAcceptsClaimVariants(t *testing.T) {
	f := newPEMFixture(t, nil)
	now := f.clock.Now()
	tests := []struct {
		name       string
		edit       func(jwt.MapClaims)
		wantScopes []string
	}{
		{"aud array holding ours", func(c jwt.MapClaims) { c["aud"] = []string{"other", testAudience} }, []string{"rules:read", "verdicts:read"}},
		{"scp array", func(c jwt.MapClaims) { delete(c, "scope"); c["scp"] = []string{"a", "b"} }, []string{"a", "b"}},
		{"scp string", func(c jwt.MapClaims) { delete(c, "scope"); c["scp"] = "a  b" }, []string{"a", "b"}},
		{"no scopes", func(c jwt.MapClaims) { delete(c, "scope") }, nil},
		{"expired within leeway", func(c jwt.MapClaims) { c["exp"] = now.Add(-20 * time.Second).Unix() }, []string{"rules:read", "verdicts:read"}},
		{"nbf within leeway", func(c jwt.MapClaims) { c["nbf"] = now.Add(20 * time.Second).Unix() }, []string{"rules:read", "verdicts:read"}},
		{"no sub", func(c jwt.MapClaims) { delete(c, "sub") }, []string{"rules:read", "verdicts:read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claims := validClaims(now)
			tt.edit(claims)
			p, err := f.verifier.Verify(context.Background(), mint(t, f.ed, claims))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if !slices.Equal(p.Scopes, tt.wantScopes) {
				t.Errorf("Scopes = %q, want %q", p.Scopes, tt.wantScopes)
			}
			if p.Tenant != testTenant {
				t.Errorf("Tenant = %q, want %q", p.Tenant, testTenant)
			}
		})
	}
}

func TestVerifyRefuses(t *testing.T) {
	f := newPEMFixture(t, nil)
	now := f.clock.Now()
	other := newRSAKey(t, "rsa-1", 2048) // same kid, different key
	attacker := newEdKey(t, "ed-1")

	rsaPEM := publicPEM(t, f.rsa.public())
	rsaDER, err := x509.MarshalPKIXPublicKey(f.rsa.public())
	if err != nil {
		t.Fatal(err)
	}
	with := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := validClaims(now)
		edit(c)
		return c
	}

	tests := []struct {
		name  string
		token func(t *testing.T) string
		want  string
	}{
		{"signed with another key", func(t *testing.T) string {
			return mint(t, other, validClaims(now))
		}, "signature is invalid"},
		{"alg none, unsigned, valid payload", func(t *testing.T) string {
			return mintRaw(t, map[string]any{"alg": "none", "typ": "JWT", "kid": "rsa-1"}, validClaims(now), nil, nil)
		}, "signing method none is invalid"},
		{"alg none through the library", func(t *testing.T) string {
			tok := jwt.NewWithClaims(jwt.SigningMethodNone, validClaims(now))
			s, err := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, "signing method none is invalid"},
		{"alg NONE", func(t *testing.T) string {
			return mintRaw(t, map[string]any{"alg": "NONE"}, validClaims(now), nil, nil)
		}, "signing method (alg) is unavailable"},
		{"HS256 keyed with the RSA public key PEM", func(t *testing.T) string {
			return mintRaw(t, map[string]any{"alg": "HS256", "kid": "rsa-1"}, validClaims(now), jwt.SigningMethodHS256, rsaPEM)
		}, "signing method HS256 is invalid"},
		{"HS256 keyed with the RSA public key DER", func(t *testing.T) string {
			return mintRaw(t, map[string]any{"alg": "HS256", "kid": "rsa-1"}, validClaims(now), jwt.SigningMethodHS256, rsaDER)
		}, "signing method HS256 is invalid"},
		{"HS512 keyed with the RSA public key PEM, no kid", func(t *testing.T) string {
			return mintRaw(t, map[string]any{"alg": "HS512"}, validClaims(now), jwt.SigningMethodHS512, rsaPEM)
		}, "signing method HS512 is invalid"},
		{"ES256 token naming the RSA kid", func(t *testing.T) string {
			return mint(t, f.ec.withKid("rsa-1"), validClaims(now))
		}, `token alg ES256 cannot use kid "rsa-1" (key type RSA-2048)`},
		{"RS256 token naming the ECDSA kid", func(t *testing.T) string {
			return mint(t, other.withKid("ec-1"), validClaims(now))
		}, `token alg RS256 cannot use kid "ec-1" (key type ECDSA P-256)`},
		{"EdDSA token naming the RSA kid", func(t *testing.T) string {
			return mint(t, f.ed.withKid("rsa-1"), validClaims(now))
		}, `token alg EdDSA cannot use kid "rsa-1"`},
		{"key embedded in the jwk header", func(t *testing.T) string {
			header := map[string]any{"alg": "EdDSA", "kid": "ed-1", "jwk": jwk(t, attacker, nil)}
			return mintRaw(t, header, validClaims(now), jwt.SigningMethodEdDSA, attacker.priv)
		}, "signature is invalid"},
		{"crit header", func(t *testing.T) string {
			header := map[string]any{"alg": "EdDSA", "kid": "ed-1", "crit": []string{"exp"}}
			return mintRaw(t, header, validClaims(now), jwt.SigningMethodEdDSA, f.ed.priv)
		}, `header "crit"`},
		{"unknown kid", func(t *testing.T) string {
			return mint(t, f.ed.withKid("ed-2"), validClaims(now))
		}, `unknown kid "ed-2"`},
		{"no kid with three keys configured", func(t *testing.T) string {
			return mint(t, f.ed.withKid(""), validClaims(now))
		}, "token has no kid and 3 keys are configured"},
		{"kid not a string", func(t *testing.T) string {
			return mintRaw(t, map[string]any{"alg": "EdDSA", "kid": 7}, validClaims(now), jwt.SigningMethodEdDSA, f.ed.priv)
		}, "kid header must be a non-empty string"},
		{"expired beyond leeway", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { c["exp"] = now.Add(-31 * time.Second).Unix() }))
		}, "token is expired (exp 2026-03-01T11:59:29Z, now 2026-03-01T12:00:00Z, leeway 30s)"},
		{"nbf beyond leeway", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { c["nbf"] = now.Add(31 * time.Second).Unix() }))
		}, "token is not valid yet"},
		{"iat beyond leeway", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { c["iat"] = now.Add(time.Minute).Unix() }))
		}, "token used before issued"},
		{"missing exp", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { delete(c, "exp") }))
		}, "exp claim is required"},
		{"exp not a number", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { c["exp"] = "tomorrow" }))
		}, "invalid type for claim"},
		{"wrong iss", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { c["iss"] = testIssuer + "/" }))
		}, `token has invalid issuer (iss "https://idp.example.test/", want "https://idp.example.test")`},
		{"missing iss", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { delete(c, "iss") }))
		}, "iss claim is required"},
		{"wrong aud", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { c["aud"] = "billing-api" }))
		}, "token has invalid audience"},
		{"aud array without ours", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { c["aud"] = []string{"billing-api", "reports-api"} }))
		}, `token has invalid audience (aud ["billing-api" "reports-api"], want "rulevalidator-api" among them)`},
		{"missing aud", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { delete(c, "aud") }))
		}, "aud claim is required"},
		{"missing tenant", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { delete(c, "tenant_id") }))
		}, `tenant claim "tenant_id" is missing`},
		{"tenant only in another claim", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { delete(c, "tenant_id"); c["tenant"] = testTenant }))
		}, `tenant claim "tenant_id" is missing`},
		{"empty tenant", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { c["tenant_id"] = "" }))
		}, `tenant claim "tenant_id" is empty`},
		{"numeric tenant", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { c["tenant_id"] = 42 }))
		}, `tenant claim "tenant_id" is a float64, not a string`},
		{"array tenant", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { c["tenant_id"] = []string{testTenant} }))
		}, `tenant claim "tenant_id" is a []interface {}, not a string`},
		{"null tenant", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { c["tenant_id"] = nil }))
		}, `tenant claim "tenant_id" is a <nil>, not a string`},
		{"tenant with a newline", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { c["tenant_id"] = "acme\nlevel=ERROR" }))
		}, "holds control characters"},
		{"sub not a string", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { c["sub"] = 17 }))
		}, `claim "sub"`},
		{"scope not a string", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { c["scope"] = []string{"a"} }))
		}, `claim "scope" is a []interface {}`},
		{"token over 8 KB", func(t *testing.T) string {
			return mint(t, f.ed, with(func(c jwt.MapClaims) { c["pad"] = strings.Repeat("x", MaxTokenBytes) }))
		}, "more than the 8192 accepted"},
		{"empty", func(*testing.T) string { return "" }, "empty token"},
		{"two segments", func(*testing.T) string { return "abc.def" }, "token is malformed"},
		{"not base64", func(*testing.T) string { return "@@@.@@@.@@@" }, "token is malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := f.verifier.Verify(context.Background(), tt.token(t))
			if err == nil {
				t.Fatalf("Verify accepted the token: %+v", p)
			}
			if !errors.Is(err, ErrUnauthorized) {
				t.Errorf("error %v does not wrap ErrUnauthorized", err)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
			if !reflect.DeepEqual(p, Principal{}) {
				t.Errorf("Principal = %+v on error, want zero", p)
			}
		})
	}
}

func TestVerifyOversizedTokenIsRefusedBeforeParsing(t *testing.T) {
	f := newPEMFixture(t, nil)
	// Not a token at all: a parser would call it malformed, the size check
	// must speak first.
	_, err := f.verifier.Verify(context.Background(), strings.Repeat("A", MaxTokenBytes+1))
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "8193 bytes") {
		t.Fatalf("Verify = %v, want a size refusal", err)
	}
	if strings.Contains(err.Error(), "malformed") {
		t.Errorf("error %q comes from the parser", err)
	}
}

func TestVerifyTokenWithoutKidWhenOneKey(t *testing.T) {
	clock := newFakeClock()
	key := newEdKey(t, "only")
	cfg := baseConfig(clock, &logbuf.Buffer{})
	cfg.PEMFiles = []string{writePEM(t, t.TempDir(), key)}
	v := newVerifier(t, cfg)

	if _, err := v.Verify(context.Background(), mint(t, key.withKid(""), validClaims(clock.Now()))); err != nil {
		t.Fatalf("token without kid, one key: %v", err)
	}
	stranger := newEdKey(t, "")
	if _, err := v.Verify(context.Background(), mint(t, stranger, validClaims(clock.Now()))); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("token without kid from another key: err = %v, want ErrUnauthorized", err)
	}
}

func TestVerifyAllowMissingExp(t *testing.T) {
	f := newPEMFixture(t, func(c *Config) { c.AllowMissingExp = true })
	claims := validClaims(f.clock.Now())
	delete(claims, "exp")
	p, err := f.verifier.Verify(context.Background(), mint(t, f.ed, claims))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if !p.ExpiresAt.IsZero() {
		t.Errorf("ExpiresAt = %v, want zero", p.ExpiresAt)
	}
	// An exp that is present is still checked.
	f.clock.Advance(2 * time.Hour)
	if _, err := f.verifier.Verify(context.Background(), mint(t, f.ed, validClaims(f.clock.Now().Add(-2*time.Hour)))); err == nil {
		t.Error("expired token accepted with AllowMissingExp")
	}
}

func TestVerifyCustomTenantClaim(t *testing.T) {
	f := newPEMFixture(t, func(c *Config) { c.TenantClaim = "org" })
	claims := validClaims(f.clock.Now())
	if _, err := f.verifier.Verify(context.Background(), mint(t, f.ed, claims)); err == nil ||
		!strings.Contains(err.Error(), `tenant claim "org" is missing`) {
		t.Fatalf("token with only tenant_id: err = %v, want the org claim missing", err)
	}
	claims["org"] = "globex"
	p, err := f.verifier.Verify(context.Background(), mint(t, f.ed, claims))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if p.Tenant != "globex" {
		t.Errorf("Tenant = %q, want globex (from org, not tenant_id)", p.Tenant)
	}
}

func TestVerifyAlgorithmAllowList(t *testing.T) {
	clock := newFakeClock()
	ed, ec := newEdKey(t, "ed-1"), newECKey(t, "ec-1")
	cfg := baseConfig(clock, &logbuf.Buffer{})
	cfg.PEMFiles = []string{writePEM(t, t.TempDir(), ed)}
	cfg.Algorithms = []string{"EdDSA", "RS256"}
	v := newVerifier(t, cfg)

	if _, err := v.Verify(context.Background(), mint(t, ed, validClaims(clock.Now()))); err != nil {
		t.Fatalf("EdDSA token: %v", err)
	}
	_, err := v.Verify(context.Background(), mint(t, ec.withKid("ed-1"), validClaims(clock.Now())))
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "signing method ES256 is invalid") {
		t.Fatalf("ES256 token: err = %v, want it refused by the allow-list", err)
	}
}
