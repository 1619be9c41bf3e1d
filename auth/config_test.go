package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"rulevalidator/internal/logbuf"
)

func TestNewVerifierRefusesConfig(t *testing.T) {
	dir := t.TempDir()
	ed := newEdKey(t, "ed-1")
	edPath := writePEM(t, dir, ed)
	clock := newFakeClock()

	tests := []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"no keys", func(c *Config) { c.PEMFiles = nil }, []string{"no keys configured"}},
		{"no issuer", func(c *Config) { c.Issuer = "" }, []string{"Issuer is required"}},
		{"no audience", func(c *Config) { c.Audience = "" }, []string{"Audience is required"}},
		{"issuer with whitespace", func(c *Config) { c.Issuer = testIssuer + "\n" }, []string{"Issuer", "surrounding whitespace"}},
		{"alg none", func(c *Config) { c.Algorithms = []string{"EdDSA", "none"} }, []string{`algorithm "none" is refused: tokens must be signed`}},
		{"HS256", func(c *Config) { c.Algorithms = []string{"HS256"} }, []string{`algorithm "HS256" is refused: only asymmetric algorithms are accepted`}},
		{"hs512 lower case", func(c *Config) { c.Algorithms = []string{"hs512"} }, []string{`algorithm "hs512" is refused`}},
		{"unknown alg", func(c *Config) { c.Algorithms = []string{"ES256K"} }, []string{`algorithm "ES256K" is not supported (supported: ES256 ES384 ES512 EdDSA PS256`}},
		{"alg twice", func(c *Config) { c.Algorithms = []string{"EdDSA", "EdDSA"} }, []string{`algorithm "EdDSA" is listed twice`}},
		{"negative leeway", func(c *Config) { c.Leeway = -time.Second }, []string{"Leeway -1s is outside [0, 5m0s]"}},
		{"huge leeway", func(c *Config) { c.Leeway = time.Hour }, []string{"Leeway 1h0m0s is outside"}},
		{"JWKS URL scheme", func(c *Config) { c.JWKSURL = "file:///etc/jwks.json" }, []string{`JWKSURL "file:///etc/jwks.json": scheme must be http or https`}},
		{"JWKS URL without host", func(c *Config) { c.JWKSURL = "https:///jwks" }, []string{"has no host"}},
		{"JWKS refresh too often", func(c *Config) { c.JWKSURL = "https://idp.example.test/jwks"; c.JWKSRefresh = time.Second }, []string{"JWKSRefresh 1s is outside [30s, 24h0m0s]"}},
		{"empty PEM path", func(c *Config) { c.PEMFiles = append(c.PEMFiles, " ") }, []string{"PEMFiles[1] is empty"}},
		{"missing PEM file", func(c *Config) { c.PEMFiles = []string{dir + "/absent.pem"} }, []string{"absent.pem", "no such file"}},
		{"PEM key fits no allowed alg", func(c *Config) { c.Algorithms = []string{"RS256"} }, []string{"ed-1.pem: Ed25519 key fits none of the allowed algorithms [RS256]"}},
		{"two PEM files with one kid", func(c *Config) {
			c.PEMFiles = append(c.PEMFiles, writeFile(t, t.TempDir(), "ed-1.pub", publicPEM(t, ed.public())))
		}, []string{`both give kid "ed-1"`}},
		{"several problems at once", func(c *Config) { c.Issuer, c.Audience, c.Algorithms = "", "", []string{"none"} }, []string{"Issuer is required", "Audience is required", `"none" is refused`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig(clock, &logbuf.Buffer{})
			cfg.PEMFiles = []string{edPath}
			tt.edit(&cfg)
			v, err := NewVerifier(context.Background(), cfg)
			if err == nil {
				t.Fatalf("NewVerifier accepted the config: %+v", v)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

func TestNewVerifierDefaults(t *testing.T) {
	ed := newEdKey(t, "ed-1")
	cfg := Config{Issuer: testIssuer, Audience: testAudience, PEMFiles: []string{writePEM(t, t.TempDir(), ed)}}
	v := newVerifier(t, cfg)
	got := v.cfg
	if strings.Join(got.Algorithms, " ") != "RS256 ES256 EdDSA" || got.TenantClaim != "tenant_id" ||
		got.Leeway != 30*time.Second || got.JWKSRefresh != 10*time.Minute || got.AllowMissingExp ||
		got.HTTPClient == nil || got.Now == nil || got.Logger == nil {
		t.Errorf("defaults not applied: %+v", got)
	}
	// A token minted against the real clock verifies with the default clock.
	if _, err := v.Verify(context.Background(), mint(t, ed, validClaims(time.Now()))); err != nil {
		t.Errorf("Verify with defaults: %v", err)
	}
}

func TestPEMKeyFiles(t *testing.T) {
	dir := t.TempDir()
	rsaKey := newRSAKey(t, "rsa", 2048)
	ecKey := newECKey(t, "ec")
	small := newRSAKey(t, "small", 1024)

	certDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "signer"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "signer"}}, ecKey.public(), ecKey.priv)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(ecKey.priv)
	if err != nil {
		t.Fatal(err)
	}
	block := func(typ string, der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}) }

	tests := []struct {
		name    string
		content []byte
		want    string // empty: the file loads
	}{
		{"PKIX RSA", publicPEM(t, rsaKey.public()), ""},
		{"PKIX ECDSA", publicPEM(t, ecKey.public()), ""},
		{"PKCS#1 RSA", block("RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(rsaKey.public().(*rsa.PublicKey))), ""},
		{"certificate", block("CERTIFICATE", certDER), ""},
		{"RSA 1024", publicPEM(t, small.public()), "RSA key has 1024 bits, fewer than the 2048 required"},
		{"private key", block("PRIVATE KEY", pkcs8), "holds a PRIVATE KEY; configure its public key instead"},
		{"two blocks", append(publicPEM(t, rsaKey.public()), publicPEM(t, ecKey.public())...), "holds more than one PEM block"},
		{"not PEM", []byte("ssh-ed25519 AAAA..."), "no PEM block found"},
		{"other block", block("EC PARAMETERS", []byte{6, 8}), `PEM block type "EC PARAMETERS" is not a public key`},
		{"corrupt key", block("PUBLIC KEY", []byte{1, 2, 3}), "parse PUBLIC KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, dir, "signer-2026.pem", tt.content)
			keys, err := loadPEMKeys([]string{path}, []string{"RS256", "ES256"})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				if _, ok := keys["signer-2026"]; !ok || len(keys) != 1 {
					t.Fatalf("keys = %v, want one key with kid signer-2026", keys)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("load error = %v, want it to name %s and say %q", err, path, tt.want)
			}
		})
	}
}

func TestNewVerifierRefusesSmallRSAKey(t *testing.T) {
	small := newRSAKey(t, "small", 1024)
	cfg := baseConfig(newFakeClock(), &logbuf.Buffer{})
	cfg.PEMFiles = []string{writePEM(t, t.TempDir(), small)}
	_, err := NewVerifier(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "RSA key has 1024 bits, fewer than the 2048 required") {
		t.Fatalf("NewVerifier = %v, want the 1024-bit key refused", err)
	}
}

func TestNewVerifierInitialJWKSFetchMustSucceed(t *testing.T) {
	ed := newEdKey(t, "ed-1")
	tests := []struct {
		name  string
		setup func(*jwksServer)
		want  string
	}{
		{"server error", func(s *jwksServer) { s.setStatus(http.StatusInternalServerError) }, "HTTP status 500"},
		{"not JSON", func(s *jwksServer) { s.setDoc([]byte("<html>")) }, "decode JWKS"},
		{"no keys member", func(s *jwksServer) { s.setDoc([]byte(`{"kids":[]}`)) }, `JWKS has no "keys" array`},
		{"only ignored keys", func(s *jwksServer) { s.setKeys(t, jwk(t, ed, map[string]any{"use": "enc"})) }, "no usable signature key (1 keys, all ignored)"},
		{"over 1 MiB", func(s *jwksServer) {
			s.setDoc([]byte(`{"keys":[],"pad":"` + strings.Repeat("x", MaxJWKSBytes) + `"}`))
		}, "response larger than 1048576 bytes"},
		{"duplicate kid", func(s *jwksServer) { s.setKeys(t, jwk(t, ed, nil), jwk(t, ed, nil)) }, `two usable keys with kid "ed-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newJWKSServer(t, jwk(t, ed, nil))
			tt.setup(srv)
			cfg := baseConfig(newFakeClock(), &logbuf.Buffer{})
			cfg.JWKSURL = srv.URL
			_, err := NewVerifier(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "initial JWKS fetch") {
				t.Fatalf("NewVerifier = %v, want initial fetch failure %q", err, tt.want)
			}
		})
	}

	t.Run("unreachable", func(t *testing.T) {
		srv := newJWKSServer(t, jwk(t, ed, nil))
		srv.Close()
		cfg := baseConfig(newFakeClock(), &logbuf.Buffer{})
		cfg.JWKSURL = srv.URL
		if _, err := NewVerifier(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), srv.URL) {
			t.Fatalf("NewVerifier = %v, want a fetch error naming %s", err, srv.URL)
		}
	})
}
