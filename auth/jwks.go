package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// jwksCache holds the keys of one JWKS URL and refetches them, never more often
// than MinJWKSRefetch and never twice at once.
type jwksCache struct {
	url        string
	client     *http.Client
	algs       []string
	refreshAge time.Duration
	now        func() time.Time
	log        *slog.Logger

	mu          sync.Mutex
	keys        map[string]verificationKey
	fetchedAt   time.Time     // last successful fetch
	attemptedAt time.Time     // last fetch started, successful or not
	inflight    chan struct{} // closed when the running fetch ends; nil when none runs

	// fetches tracks background fetches so tests can wait for them.
	fetches sync.WaitGroup
}

func newJWKSCache(cfg Config) *jwksCache {
	return &jwksCache{
		url:        cfg.JWKSURL,
		client:     cfg.HTTPClient,
		algs:       cfg.Algorithms,
		refreshAge: cfg.JWKSRefresh,
		now:        cfg.Now,
		log:        cfg.Logger.With("jwks_url", cfg.JWKSURL),
	}
}

// load does the first fetch; unlike later ones, its failure is the caller's.
func (c *jwksCache) load(ctx context.Context) error {
	c.mu.Lock()
	c.attemptedAt = c.now()
	c.mu.Unlock()
	keys, err := c.fetch(ctx)
	if err != nil {
		return err
	}
	c.store(keys)
	return nil
}

// lookup returns the cached key with this kid.
func (c *jwksCache) lookup(kid string) (verificationKey, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.keys[kid]
	return k, ok
}

// snapshot returns the cached keys; the map must not be modified.
func (c *jwksCache) snapshot() map[string]verificationKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.keys
}

// refreshIfStale starts a background fetch when the keys are older than the
// refresh period; the caller goes on with the cached keys.
func (c *jwksCache) refreshIfStale() {
	c.mu.Lock()
	stale := c.now().Sub(c.fetchedAt) >= c.refreshAge
	c.mu.Unlock()
	if stale {
		c.trigger("periodic refresh")
	}
}

// refreshForKid fetches because a token named a kid not in the cache, and
// waits for that fetch. It reports false when the rate limit stopped it.
func (c *jwksCache) refreshForKid(ctx context.Context, kid string) (bool, error) {
	done := c.trigger(fmt.Sprintf("unknown kid %q", kid))
	if done == nil {
		return false, nil
	}
	select {
	case <-done:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// trigger starts a fetch unless one runs already (then it returns that one's
// channel) or the last one started less than MinJWKSRefetch ago (then nil).
// The fetch runs detached from any request so that one caller giving up does
// not cancel it for the others; JWKSFetchTimeout bounds it.
func (c *jwksCache) trigger(reason string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight != nil {
		return c.inflight
	}
	now := c.now()
	if now.Sub(c.attemptedAt) < MinJWKSRefetch {
		return nil
	}
	c.attemptedAt = now
	done := make(chan struct{})
	c.inflight = done
	c.fetches.Add(1)
	go func() {
		defer c.fetches.Done()
		defer func() {
			c.mu.Lock()
			c.inflight = nil
			c.mu.Unlock()
			close(done)
		}()
		keys, err := c.fetch(context.Background())
		if err != nil {
			c.mu.Lock()
			age := c.now().Sub(c.fetchedAt)
			c.mu.Unlock()
			c.log.Warn("JWKS refresh failed; keeping cached keys", "reason", reason, "cached_age", age.Round(time.Second), "err", err)
			return
		}
		c.store(keys)
		c.log.Debug("JWKS refreshed", "reason", reason, "kids", sortedKids(keys))
	}()
	return done
}

func (c *jwksCache) store(keys map[string]verificationKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys = keys
	c.fetchedAt = c.now()
}

// fetch downloads and parses the JWKS. Keys it cannot use are logged and left
// out; a document with no usable key at all is an error, so that a broken
// server cannot empty the cache.
func (c *jwksCache) fetch(ctx context.Context) (map[string]verificationKey, error) {
	ctx, cancel := context.WithTimeout(ctx, JWKSFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", c.url, err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", c.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("JWKS %s: HTTP status %s", c.url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: read body: %w", c.url, err)
	}
	if len(body) > MaxJWKSBytes {
		return nil, fmt.Errorf("JWKS %s: response larger than %d bytes", c.url, MaxJWKSBytes)
	}
	keys, ignored, err := parseJWKS(body, c.algs, c.url)
	for _, why := range ignored {
		c.log.Warn("JWKS key ignored", "why", why)
	}
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", c.url, err)
	}
	return keys, nil
}

func sortedKids(keys map[string]verificationKey) []string {
	kids := make([]string, 0, len(keys))
	for kid := range keys {
		kids = append(kids, kid)
	}
	slices.Sort(kids)
	return kids
}

// jsonWebKey holds the JWK members this package reads (RFC 7517, 7518, 8037).
type jsonWebKey struct {
	Kty    string   `json:"kty"`
	Kid    string   `json:"kid"`
	Use    string   `json:"use"`
	Alg    string   `json:"alg"`
	KeyOps []string `json:"key_ops"`
	Crv    string   `json:"crv"`
	N      string   `json:"n"`
	E      string   `json:"e"`
	X      string   `json:"x"`
	Y      string   `json:"y"`
	D      string   `json:"d"`
}

// parseJWKS returns the usable signature keys by kid, and why each other key was
// left out. Two usable keys with one kid make the document an error: which key
// a token means would be a guess.
func parseJWKS(data []byte, algs []string, source string) (map[string]verificationKey, []string, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("decode JWKS: %w", err)
	}
	if doc.Keys == nil {
		return nil, nil, errors.New(`JWKS has no "keys" array`)
	}
	keys := map[string]verificationKey{}
	var ignored []string
	for i, raw := range doc.Keys {
		var jwk jsonWebKey
		if err := json.Unmarshal(raw, &jwk); err != nil {
			ignored = append(ignored, fmt.Sprintf("keys[%d]: %v", i, err))
			continue
		}
		key, err := jwk.publicKey(algs)
		if err != nil {
			ignored = append(ignored, fmt.Sprintf("keys[%d] (kid %q): %v", i, jwk.Kid, err))
			continue
		}
		if _, dup := keys[jwk.Kid]; dup {
			return nil, ignored, fmt.Errorf("JWKS holds two usable keys with kid %q", jwk.Kid)
		}
		keys[jwk.Kid] = verificationKey{kid: jwk.Kid, key: key, alg: jwk.Alg, source: source}
	}
	if len(keys) == 0 {
		return nil, ignored, fmt.Errorf("JWKS holds no usable signature key (%d keys, all ignored)", len(doc.Keys))
	}
	return keys, ignored, nil
}

// publicKey checks that the JWK is a public signature key usable with one of
// algs and builds it.
func (k jsonWebKey) publicKey(algs []string) (crypto.PublicKey, error) {
	if k.Kid == "" {
		return nil, errors.New("no kid")
	}
	if k.Use != "" && k.Use != "sig" {
		return nil, fmt.Errorf("use is %q, not \"sig\"", k.Use)
	}
	if k.KeyOps != nil && !slices.Contains(k.KeyOps, "verify") {
		return nil, fmt.Errorf("key_ops %v lacks \"verify\"", k.KeyOps)
	}
	if k.D != "" {
		return nil, errors.New("holds private key material")
	}
	if k.Alg != "" && !slices.Contains(algs, k.Alg) {
		return nil, fmt.Errorf("alg %q is not allowed", k.Alg)
	}
	var (
		key crypto.PublicKey
		err error
	)
	switch k.Kty {
	case "RSA":
		key, err = k.rsaKey()
	case "EC":
		key, err = k.ecdsaKey()
	case "OKP":
		key, err = k.ed25519Key()
	default:
		return nil, fmt.Errorf("kty %q is not supported", k.Kty)
	}
	if err != nil {
		return nil, err
	}
	if err := checkPublicKey(key); err != nil {
		return nil, err
	}
	if k.Alg != "" && !keyFitsAlg(key, k.Alg) {
		return nil, fmt.Errorf("%s key cannot verify its own alg %q", describeKey(key), k.Alg)
	}
	if !fitsAnyAlg(key, algs) {
		return nil, fmt.Errorf("%s key fits none of the allowed algorithms %v", describeKey(key), algs)
	}
	return key, nil
}

func (k jsonWebKey) rsaKey() (*rsa.PublicKey, error) {
	n, err := decodeB64URL("n", k.N)
	if err != nil {
		return nil, err
	}
	e, err := decodeB64URL("e", k.E)
	if err != nil {
		return nil, err
	}
	if len(e) == 0 || len(e) > 4 {
		return nil, fmt.Errorf("RSA exponent has %d bytes", len(e))
	}
	exp := 0
	for _, b := range e {
		exp = exp<<8 | int(b)
	}
	return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp}, nil
}

func (k jsonWebKey) ecdsaKey() (*ecdsa.PublicKey, error) {
	var curve elliptic.Curve
	switch k.Crv {
	case "P-256":
		curve = elliptic.P256()
	case "P-384":
		curve = elliptic.P384()
	case "P-521":
		curve = elliptic.P521()
	default:
		return nil, fmt.Errorf("EC curve %q is not supported", k.Crv)
	}
	size := (curve.Params().BitSize + 7) / 8
	x, err := decodeB64URL("x", k.X)
	if err != nil {
		return nil, err
	}
	y, err := decodeB64URL("y", k.Y)
	if err != nil {
		return nil, err
	}
	if len(x) != size || len(y) != size {
		return nil, fmt.Errorf("%s coordinates have %d and %d bytes, want %d", k.Crv, len(x), len(y), size)
	}
	point := append(append([]byte{4}, x...), y...)
	// ParseUncompressedPublicKey also checks that the point is on the curve.
	key, err := ecdsa.ParseUncompressedPublicKey(curve, point)
	if err != nil {
		return nil, fmt.Errorf("%s point: %w", k.Crv, err)
	}
	return key, nil
}

func (k jsonWebKey) ed25519Key() (ed25519.PublicKey, error) {
	if k.Crv != "Ed25519" {
		return nil, fmt.Errorf("OKP curve %q is not supported", k.Crv)
	}
	x, err := decodeB64URL("x", k.X)
	if err != nil {
		return nil, err
	}
	if len(x) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("Ed25519 x has %d bytes, want %d", len(x), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(x), nil
}

// decodeB64URL decodes a base64url member, tolerating padding some servers add.
func decodeB64URL(member, s string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("member %q is missing", member)
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, fmt.Errorf("member %q: %w", member, err)
	}
	return b, nil
}
