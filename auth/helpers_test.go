package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"rulevalidator/internal/logbuf"
)

const (
	testIssuer   = "https://idp.example.test"
	testAudience = "rulevalidator-api"
	testTenant   = "acme"
)

// testKey is a signing key generated for one test run; no private key is
// committed anywhere.
type testKey struct {
	kid    string
	method jwt.SigningMethod
	priv   crypto.Signer
}

func (k testKey) public() crypto.PublicKey { return k.priv.Public() }

func newRSAKey(t *testing.T, kid string, bits int) testKey {
	t.Helper()
	priv, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatalf("generate RSA-%d key: %v", bits, err)
	}
	return testKey{kid: kid, method: jwt.SigningMethodRS256, priv: priv}
}

func newECKey(t *testing.T, kid string) testKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate P-256 key: %v", err)
	}
	return testKey{kid: kid, method: jwt.SigningMethodES256, priv: priv}
}

func newEdKey(t *testing.T, kid string) testKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("generate Ed25519 key: %v", err)
	}
	return testKey{kid: kid, method: jwt.SigningMethodEdDSA, priv: priv}
}

// withKid returns the same key material under another kid.
func (k testKey) withKid(kid string) testKey {
	k.kid = kid
	return k
}

// fakeClock is a settable clock shared by the verifier and the token minter.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// validClaims are claims the test verifiers accept, issued at now.
func validClaims(now time.Time) jwt.MapClaims {
	return jwt.MapClaims{
		"iss":       testIssuer,
		"aud":       testAudience,
		"sub":       "user-17",
		"tenant_id": testTenant,
		"iat":       now.Unix(),
		"nbf":       now.Unix(),
		"exp":       now.Add(time.Hour).Unix(),
		"scope":     "rules:read verdicts:read",
	}
}

// mint signs claims with k; a kid header is set when k has one.
func mint(t *testing.T, k testKey, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(k.method, claims)
	if k.kid != "" {
		tok.Header["kid"] = k.kid
	}
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatalf("sign token with %s: %v", k.method.Alg(), err)
	}
	return s
}

// mintRaw signs an arbitrary header and claims with method and key, for
// tokens the jwt library's own helpers would not build.
func mintRaw(t *testing.T, header map[string]any, claims jwt.MapClaims, method jwt.SigningMethod, key any) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	signing := b64(h) + "." + b64(c)
	if method == nil {
		return signing + "."
	}
	sig, err := method.Sign(signing, key)
	if err != nil {
		t.Fatalf("sign with %s: %v", method.Alg(), err)
	}
	return signing + "." + b64(sig)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// publicPEM encodes a public key as a PKIX "PUBLIC KEY" PEM block.
func publicPEM(t *testing.T, pub crypto.PublicKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatalf("marshal public key: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// writePEM writes k's public key to dir/<kid>.pem and returns the path.
func writePEM(t *testing.T, dir string, k testKey) string {
	t.Helper()
	return writeFile(t, dir, k.kid+".pem", publicPEM(t, k.public()))
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// debugLogger logs everything into b.
func debugLogger(b *logbuf.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// baseConfig is a valid config apart from its keys.
func baseConfig(clock *fakeClock, logs *logbuf.Buffer) Config {
	return Config{
		Issuer:   testIssuer,
		Audience: testAudience,
		Now:      clock.Now,
		Logger:   debugLogger(logs),
	}
}

func newVerifier(t *testing.T, cfg Config) *Verifier {
	t.Helper()
	v, err := NewVerifier(context.Background(), cfg)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	t.Cleanup(func() { waitForFetches(v) })
	return v
}

// waitForFetches waits for background JWKS fetches the verifier started.
func waitForFetches(v *Verifier) {
	if v.jwks != nil {
		v.jwks.fetches.Wait()
	}
}

// jwksServer serves a JWKS that tests can change, break and count hits on.
type jwksServer struct {
	*httptest.Server
	mu     sync.Mutex
	doc    []byte
	status int
	hits   int
	gate   chan struct{} // when set, requests wait for it to close
}

func newJWKSServer(t *testing.T, keys ...map[string]any) *jwksServer {
	t.Helper()
	s := &jwksServer{status: http.StatusOK}
	s.setKeys(t, keys...)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		gate := s.gate
		s.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.hits++
		if s.status != http.StatusOK {
			http.Error(w, "unavailable", s.status)
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Write(s.doc)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) setKeys(t *testing.T, keys ...map[string]any) {
	t.Helper()
	if keys == nil {
		keys = []map[string]any{}
	}
	doc, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	s.setDoc(doc)
}

func (s *jwksServer) setDoc(doc []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doc = doc
}

// stall holds requests until the returned release is called.
func (s *jwksServer) stall() (release func()) {
	gate := make(chan struct{})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = gate
	return sync.OnceFunc(func() { close(gate) })
}

func (s *jwksServer) setStatus(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = status
}

func (s *jwksServer) hitCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits
}

// jwk encodes k's public key as a JWK with use "sig"; extra members override.
func jwk(t *testing.T, k testKey, extra map[string]any) map[string]any {
	t.Helper()
	m := map[string]any{"kid": k.kid, "use": "sig"}
	switch pub := k.public().(type) {
	case *rsa.PublicKey:
		m["kty"] = "RSA"
		m["n"] = b64(pub.N.Bytes())
		m["e"] = b64(big.NewInt(int64(pub.E)).Bytes())
	case *ecdsa.PublicKey:
		point, err := pub.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		size := (len(point) - 1) / 2
		m["kty"] = "EC"
		m["crv"] = pub.Curve.Params().Name
		m["x"] = b64(point[1 : 1+size])
		m["y"] = b64(point[1+size:])
	case ed25519.PublicKey:
		m["kty"] = "OKP"
		m["crv"] = "Ed25519"
		m["x"] = b64(pub)
	default:
		t.Fatalf("no JWK encoding for %T", pub)
	}
	for name, v := range extra {
		m[name] = v
	}
	return m
}
