package auth

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Defaults and limits of Config.
const (
	DefaultTenantClaim = "tenant_id"
	DefaultLeeway      = 30 * time.Second
	DefaultJWKSRefresh = 10 * time.Minute

	// MaxLeeway bounds the clock-skew allowance: more than this hides a broken clock
	// and keeps expired tokens alive.
	MaxLeeway = 5 * time.Minute
	// MinJWKSRefetch is the shortest time between two JWKS fetches, whatever asks
	// for them: tokens with made-up kids cannot turn the verifier into a flood
	// against the key server.
	MinJWKSRefetch = 30 * time.Second
	// MaxJWKSRefresh bounds the periodic refresh so revoked keys do not linger.
	MaxJWKSRefresh = 24 * time.Hour
	// JWKSFetchTimeout bounds one JWKS fetch.
	JWKSFetchTimeout = 10 * time.Second
	// MaxJWKSBytes caps a JWKS response body.
	MaxJWKSBytes = 1 << 20
	// MaxTokenBytes caps a token; longer ones are refused before any parsing.
	MaxTokenBytes = 8 << 10
	// MinRSABits is the smallest RSA modulus accepted, from a PEM file or a JWKS.
	MinRSABits = 2048
)

// DefaultAlgorithms is the allow-list used when Config.Algorithms is empty.
var DefaultAlgorithms = []string{"RS256", "ES256", "EdDSA"}

// Config says which bearer tokens a Verifier accepts. Keys come from a JWKS URL,
// PEM files, or both; Issuer and Audience are required.
type Config struct {
	// JWKSURL is an http(s) URL serving a JSON Web Key Set. It is fetched once by
	// NewVerifier (which fails if that fetch fails), again every JWKSRefresh, and
	// again when a token names a kid it does not hold; fetches are at least
	// MinJWKSRefetch apart. When a fetch fails the cached keys stay in use.
	// Keys whose "use" is not "sig", keys without a kid and RSA keys under
	// MinRSABits are ignored.
	JWKSURL string
	// JWKSRefresh is the period of the JWKS refresh. Default DefaultJWKSRefresh;
	// between MinJWKSRefetch and MaxJWKSRefresh.
	JWKSRefresh time.Duration

	// PEMFiles are public keys, one per file: a PKIX "PUBLIC KEY" (RSA, ECDSA or
	// Ed25519), a PKCS#1 "RSA PUBLIC KEY", or a "CERTIFICATE" whose key is used
	// (the certificate itself is not checked). A key's kid is its file's base name
	// without extension: keys/signer-2025.pem holds kid "signer-2025". A token
	// without a kid is accepted only when the verifier holds exactly one key.
	// Where a PEM kid and a JWKS kid collide, the PEM key wins.
	PEMFiles []string

	// Algorithms is the allow-list of JWS algorithms. Default DefaultAlgorithms.
	// Supported: RS256 RS384 RS512 PS256 PS384 PS512 ES256 ES384 ES512 EdDSA.
	// "none" and the HMAC algorithms (HS*) are refused.
	Algorithms []string

	// Issuer must equal the token's iss exactly. Required.
	Issuer string
	// Audience must be the token's aud or one of its entries. Required.
	Audience string
	// TenantClaim names the claim holding the caller's tenant, a non-empty string.
	// The tenant is taken from this claim and nowhere else. Default DefaultTenantClaim.
	TenantClaim string

	// Leeway is the clock-skew allowance applied to exp, nbf and iat.
	// Default DefaultLeeway; at most MaxLeeway.
	Leeway time.Duration
	// AllowMissingExp accepts tokens without an exp claim. By default such
	// tokens are refused: a token that never expires cannot be contained.
	AllowMissingExp bool

	// HTTPClient fetches the JWKS. Default: a new client with no timeout of its
	// own (each fetch is bounded by JWKSFetchTimeout).
	HTTPClient *http.Client
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives JWKS refreshes and their failures. Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if len(c.Algorithms) == 0 {
		c.Algorithms = slices.Clone(DefaultAlgorithms)
	}
	if c.TenantClaim == "" {
		c.TenantClaim = DefaultTenantClaim
	}
	if c.Leeway == 0 {
		c.Leeway = DefaultLeeway
	}
	if c.JWKSRefresh == 0 {
		c.JWKSRefresh = DefaultJWKSRefresh
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every problem with c at once; call it after defaults are set.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if c.JWKSURL == "" && len(c.PEMFiles) == 0 {
		add("no keys configured: set JWKSURL, PEMFiles or both")
	}
	if c.JWKSURL != "" {
		if err := checkJWKSURL(c.JWKSURL); err != nil {
			errs = append(errs, err)
		}
		if c.JWKSRefresh < MinJWKSRefetch || c.JWKSRefresh > MaxJWKSRefresh {
			add("JWKSRefresh %s is outside [%s, %s]", c.JWKSRefresh, MinJWKSRefetch, MaxJWKSRefresh)
		}
	}
	for i, p := range c.PEMFiles {
		if strings.TrimSpace(p) == "" {
			add("PEMFiles[%d] is empty", i)
		}
	}

	seen := map[string]bool{}
	for _, alg := range c.Algorithms {
		switch {
		case seen[alg]:
			add("algorithm %q is listed twice", alg)
		case strings.EqualFold(alg, "none"):
			add("algorithm %q is refused: tokens must be signed", alg)
		case strings.HasPrefix(strings.ToUpper(alg), "HS"):
			add("algorithm %q is refused: only asymmetric algorithms are accepted", alg)
		case !isSupportedAlg(alg):
			add("algorithm %q is not supported (supported: %s)", alg, strings.Join(supportedAlgNames(), " "))
		}
		seen[alg] = true
	}

	if c.Issuer == "" {
		add("Issuer is required")
	} else if strings.TrimSpace(c.Issuer) != c.Issuer {
		add("Issuer %q has surrounding whitespace", c.Issuer)
	}
	if c.Audience == "" {
		add("Audience is required")
	} else if strings.TrimSpace(c.Audience) != c.Audience {
		add("Audience %q has surrounding whitespace", c.Audience)
	}
	if strings.TrimSpace(c.TenantClaim) != c.TenantClaim {
		add("TenantClaim %q has surrounding whitespace", c.TenantClaim)
	}
	if c.Leeway < 0 || c.Leeway > MaxLeeway {
		add("Leeway %s is outside [0, %s]", c.Leeway, MaxLeeway)
	}
	return errors.Join(errs...)
}

func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("JWKSURL %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("JWKSURL %q: scheme must be http or https", raw)
	}
	if u.Host == "" {
		return fmt.Errorf("JWKSURL %q has no host", raw)
	}
	return nil
}
