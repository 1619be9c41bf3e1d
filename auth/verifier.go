// Package auth verifies the credentials of the service's HTTP API: signed JWT
// bearer tokens from the identity provider (Verifier) and the shared token of
// internal callers (StaticToken).
//
// Every refusal wraps ErrUnauthorized and says in its message what was wrong,
// for logs; the HTTP layer answers a plain 401 and does not echo it.
package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
)

// ErrUnauthorized is wrapped by every verification failure.
var ErrUnauthorized = errors.New("unauthorized")

// MaxTenantBytes bounds a tenant id; it ends up in object keys and log lines.
const MaxTenantBytes = 256

// CheckTenant says why a tenant id cannot be one (empty, over MaxTenantBytes,
// not UTF-8, control characters), or nil: the one rule of what a tenant id
// may be, for the tenant claim of a token and for whoever names tenants.
func CheckTenant(tenant string) error {
	switch {
	case tenant == "":
		return errors.New("is empty")
	case len(tenant) > MaxTenantBytes:
		return fmt.Errorf("is %d bytes, over the limit of %d", len(tenant), MaxTenantBytes)
	case !utf8.ValidString(tenant):
		return errors.New("is not valid UTF-8")
	case strings.ContainsFunc(tenant, unicode.IsControl):
		return errors.New("holds control characters")
	}
	return nil
}

// Principal is who a verified token speaks for.
type Principal struct {
	Subject string
	// Tenant comes only from the configured tenant claim.
	Tenant string
	Issuer string
	// Scopes come from "scope" (space-separated) or, failing that, "scp"
	// (space-separated string or array of strings).
	Scopes []string
	// ExpiresAt is zero for a token without exp (only with AllowMissingExp).
	ExpiresAt time.Time
}

// Verifier checks bearer tokens against configured keys and claims. It is safe
// for concurrent use.
type Verifier struct {
	cfg    Config
	parser *jwt.Parser
	pem    map[string]verificationKey // by kid; fixed after NewVerifier
	jwks   *jwksCache                 // nil without JWKSURL
}

// NewVerifier checks cfg, loads its PEM keys and fetches its JWKS once; any
// problem there is returned rather than met on the first request.
func NewVerifier(ctx context.Context, cfg Config) (*Verifier, error) {
	cfg.setDefaults()
	cfg.Algorithms = append([]string(nil), cfg.Algorithms...)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("auth config: %w", err)
	}
	pemKeys, err := loadPEMKeys(cfg.PEMFiles, cfg.Algorithms)
	if err != nil {
		return nil, fmt.Errorf("auth config: %w", err)
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(cfg.Algorithms),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithLeeway(cfg.Leeway),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(cfg.Now),
		jwt.WithStrictDecoding(),
	}
	if !cfg.AllowMissingExp {
		opts = append(opts, jwt.WithExpirationRequired())
	}
	v := &Verifier{cfg: cfg, parser: jwt.NewParser(opts...), pem: pemKeys}
	if cfg.JWKSURL != "" {
		v.jwks = newJWKSCache(cfg)
		if err := v.jwks.load(ctx); err != nil {
			return nil, fmt.Errorf("auth: initial JWKS fetch: %w", err)
		}
		for kid := range v.jwks.snapshot() {
			if k, ok := pemKeys[kid]; ok {
				cfg.Logger.Warn("kid served by the JWKS is also a PEM file's; the PEM key wins", "kid", kid, "pem_file", k.source)
			}
		}
	}
	return v, nil
}

// Verify checks token's size, signature, algorithm, key type and claims, and
// returns the Principal it names. Every error wraps ErrUnauthorized.
func (v *Verifier) Verify(ctx context.Context, token string) (Principal, error) {
	if token == "" {
		return Principal{}, unauthorized("empty token")
	}
	if len(token) > MaxTokenBytes {
		return Principal{}, unauthorized("token is %d bytes, more than the %d accepted", len(token), MaxTokenBytes)
	}
	if v.jwks != nil {
		v.jwks.refreshIfStale()
	}
	claims := jwt.MapClaims{}
	_, err := v.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		return v.keyFor(ctx, t)
	})
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %w%s", ErrUnauthorized, err, v.claimDetails(err, claims))
	}
	return v.principal(claims)
}

// keyFor picks the key for a parsed, not yet verified token. It never reads
// keys from the token (jwk, jku, x5u, x5c headers) and returns a key only when
// its type is the one the token's algorithm needs.
func (v *Verifier) keyFor(ctx context.Context, t *jwt.Token) (any, error) {
	// The parser has already refused algorithms outside the allow-list.
	alg := t.Method.Alg()
	if _, ok := t.Header["crit"]; ok {
		return nil, fmt.Errorf("header \"crit\" names extensions this verifier does not understand")
	}
	k, err := v.findKey(ctx, t.Header)
	if err != nil {
		return nil, err
	}
	if !keyFitsAlg(k.key, alg) {
		return nil, fmt.Errorf("token alg %s cannot use kid %q (key type %s)", alg, k.kid, describeKey(k.key))
	}
	if k.alg != "" && k.alg != alg {
		return nil, fmt.Errorf("token alg %s differs from alg %s pinned by kid %q", alg, k.alg, k.kid)
	}
	return k.key, nil
}

func (v *Verifier) findKey(ctx context.Context, header map[string]any) (verificationKey, error) {
	raw, hasKid := header["kid"]
	if !hasKid {
		all := v.allKeys()
		if len(all) != 1 {
			return verificationKey{}, fmt.Errorf("token has no kid and %d keys are configured", len(all))
		}
		return all[0], nil
	}
	kid, ok := raw.(string)
	if !ok || kid == "" {
		return verificationKey{}, fmt.Errorf("kid header must be a non-empty string, got %v", raw)
	}
	if k, ok := v.pem[kid]; ok {
		return k, nil
	}
	if v.jwks == nil {
		return verificationKey{}, fmt.Errorf("unknown kid %q", kid)
	}
	if k, ok := v.jwks.lookup(kid); ok {
		return k, nil
	}
	fetched, err := v.jwks.refreshForKid(ctx, kid)
	if err != nil {
		return verificationKey{}, fmt.Errorf("unknown kid %q, waiting for JWKS refresh: %w", kid, err)
	}
	if k, ok := v.jwks.lookup(kid); ok {
		return k, nil
	}
	if !fetched {
		return verificationKey{}, fmt.Errorf("unknown kid %q (JWKS refetch skipped: last one under %s ago)", kid, MinJWKSRefetch)
	}
	return verificationKey{}, fmt.Errorf("unknown kid %q, also after refetching the JWKS", kid)
}

// allKeys lists every key, PEM keys shadowing JWKS keys of the same kid.
func (v *Verifier) allKeys() []verificationKey {
	all := make([]verificationKey, 0, len(v.pem))
	for _, k := range v.pem {
		all = append(all, k)
	}
	if v.jwks != nil {
		for kid, k := range v.jwks.snapshot() {
			if _, shadowed := v.pem[kid]; !shadowed {
				all = append(all, k)
			}
		}
	}
	return all
}

// claimDetails adds the offending values to a claims error. The parser checks
// claims only after the signature, so these values were signed by a trusted key.
func (v *Verifier) claimDetails(err error, claims jwt.MapClaims) string {
	if !errors.Is(err, jwt.ErrTokenInvalidClaims) {
		return ""
	}
	var details []string
	if errors.Is(err, jwt.ErrTokenInvalidIssuer) {
		iss, _ := claims.GetIssuer()
		details = append(details, fmt.Sprintf("iss %q, want %q", iss, v.cfg.Issuer))
	}
	if errors.Is(err, jwt.ErrTokenInvalidAudience) {
		aud, _ := claims.GetAudience()
		details = append(details, fmt.Sprintf("aud %q, want %q among them", []string(aud), v.cfg.Audience))
	}
	now := v.cfg.Now().UTC()
	if errors.Is(err, jwt.ErrTokenExpired) {
		if exp, _ := claims.GetExpirationTime(); exp != nil {
			details = append(details, fmt.Sprintf("exp %s, now %s, leeway %s", exp.UTC().Format(time.RFC3339), now.Format(time.RFC3339), v.cfg.Leeway))
		}
	}
	if errors.Is(err, jwt.ErrTokenNotValidYet) {
		if nbf, _ := claims.GetNotBefore(); nbf != nil {
			details = append(details, fmt.Sprintf("nbf %s, now %s, leeway %s", nbf.UTC().Format(time.RFC3339), now.Format(time.RFC3339), v.cfg.Leeway))
		}
	}
	if errors.Is(err, jwt.ErrTokenUsedBeforeIssued) {
		if iat, _ := claims.GetIssuedAt(); iat != nil {
			details = append(details, fmt.Sprintf("iat %s, now %s, leeway %s", iat.UTC().Format(time.RFC3339), now.Format(time.RFC3339), v.cfg.Leeway))
		}
	}
	if len(details) == 0 {
		return ""
	}
	return " (" + strings.Join(details, "; ") + ")"
}

// principal reads the verified claims the parser does not check itself.
func (v *Verifier) principal(claims jwt.MapClaims) (Principal, error) {
	tenant, err := tenantFrom(claims, v.cfg.TenantClaim)
	if err != nil {
		return Principal{}, err
	}
	sub, err := claims.GetSubject()
	if err != nil {
		return Principal{}, fmt.Errorf("%w: claim \"sub\": %w", ErrUnauthorized, err)
	}
	iss, err := claims.GetIssuer()
	if err != nil {
		return Principal{}, fmt.Errorf("%w: claim \"iss\": %w", ErrUnauthorized, err)
	}
	scopes, err := scopesFrom(claims)
	if err != nil {
		return Principal{}, err
	}
	p := Principal{Subject: sub, Tenant: tenant, Issuer: iss, Scopes: scopes}
	exp, err := claims.GetExpirationTime()
	if err != nil {
		return Principal{}, fmt.Errorf("%w: claim \"exp\": %w", ErrUnauthorized, err)
	}
	if exp != nil {
		p.ExpiresAt = exp.Time
	}
	return p, nil
}

func tenantFrom(claims jwt.MapClaims, name string) (string, error) {
	raw, ok := claims[name]
	if !ok {
		return "", unauthorized("tenant claim %q is missing", name)
	}
	tenant, ok := raw.(string)
	if !ok {
		return "", unauthorized("tenant claim %q is a %T, not a string", name, raw)
	}
	if err := CheckTenant(tenant); err != nil {
		return "", unauthorized("tenant claim %q %v", name, err)
	}
	return tenant, nil
}

func scopesFrom(claims jwt.MapClaims) ([]string, error) {
	if raw, ok := claims["scope"]; ok {
		s, ok := raw.(string)
		if !ok {
			return nil, unauthorized("claim \"scope\" is a %T, not a string", raw)
		}
		return strings.Fields(s), nil
	}
	raw, ok := claims["scp"]
	if !ok {
		return nil, nil
	}
	switch scp := raw.(type) {
	case string:
		return strings.Fields(scp), nil
	case []any:
		scopes := make([]string, 0, len(scp))
		for i, item := range scp {
			s, ok := item.(string)
			if !ok {
				return nil, unauthorized("claim \"scp\"[%d] is a %T, not a string", i, item)
			}
			scopes = append(scopes, s)
		}
		return scopes, nil
	default:
		return nil, unauthorized("claim \"scp\" is a %T, neither a string nor an array", raw)
	}
}

func unauthorized(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnauthorized, fmt.Sprintf(format, args...))
}
