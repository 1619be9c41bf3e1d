// Command devtoken is a development tool for the local demo and the HTTP API's
// integration tests; it has no place in a production deployment, where tokens
// come from the identity provider.
//
// It keeps an Ed25519 key pair in a directory, creating it on first use, and
// prints one signed bearer token (EdDSA) on stdout:
//
//	go run ./internal/devtoken -dir "$RV_RUN/devtoken" \
//	    -tenant acme -iss https://dev.rulevalidator.local -aud rulevalidator-api -ttl 1h
//
// The directory holds KID.key (PKCS#8 private key, mode 0600) and KID.pem
// (PKIX public key). Give KID.pem to the service in auth.Config.PEMFiles: the
// file's base name is the kid the tokens carry. Concurrent runs against one
// directory agree on a single key.
package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// maxTTL keeps dev tokens short-lived even when they leak from a laptop.
const maxTTL = 7 * 24 * time.Hour

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, "devtoken:", err)
		os.Exit(2)
	}
}

type options struct {
	dir, kid                  string
	tenant, tenantClaim       string
	issuer, audience, subject string
	scope                     string
	ttl                       time.Duration
}

func run(args []string, stdout, stderr io.Writer) error {
	var o options
	flags := flag.NewFlagSet("devtoken", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.StringVar(&o.dir, "dir", "", "directory holding the key pair (created if missing; required)")
	flags.StringVar(&o.kid, "kid", "devtoken", "key id: the key files are KID.key and KID.pem")
	flags.StringVar(&o.tenant, "tenant", "", "tenant id (required)")
	flags.StringVar(&o.tenantClaim, "tenant-claim", "tenant_id", "claim that carries the tenant")
	flags.StringVar(&o.issuer, "iss", "", "issuer (required)")
	flags.StringVar(&o.audience, "aud", "", "audience (required)")
	flags.StringVar(&o.subject, "sub", "devtoken-user", "subject")
	flags.StringVar(&o.scope, "scope", "", "space-separated scopes")
	flags.DurationVar(&o.ttl, "ttl", time.Hour, "lifetime of the token")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	if err := o.validate(); err != nil {
		return err
	}
	key, err := loadOrCreateKey(o.dir, o.kid)
	if err != nil {
		return err
	}
	token, err := mint(key, o, time.Now())
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, token)
	return err
}

func (o options) validate() error {
	var errs []error
	for _, f := range []struct{ flag, value string }{
		{"-dir", o.dir}, {"-kid", o.kid}, {"-tenant", o.tenant}, {"-tenant-claim", o.tenantClaim},
		{"-iss", o.issuer}, {"-aud", o.audience},
	} {
		if strings.TrimSpace(f.value) == "" {
			errs = append(errs, fmt.Errorf("%s is required", f.flag))
		}
	}
	if strings.ContainsAny(o.kid, `/\.`) {
		errs = append(errs, fmt.Errorf("-kid %q must not hold '/', '\\' or '.': it names the key files", o.kid))
	}
	if o.ttl <= 0 || o.ttl > maxTTL {
		errs = append(errs, fmt.Errorf("-ttl %s is outside (0, %s]", o.ttl, maxTTL))
	}
	return errors.Join(errs...)
}

// loadOrCreateKey returns the private key in dir/kid.key, generating it when
// absent, and (re)writes dir/kid.pem from it.
func loadOrCreateKey(dir, kid string) (ed25519.PrivateKey, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	privPath := filepath.Join(dir, kid+".key")
	key, err := readPrivateKey(privPath)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = createPrivateKey(privPath)
	}
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	if err := writeAtomically(filepath.Join(dir, kid+".pem"), pubPEM, 0o644); err != nil {
		return nil, err
	}
	return key, nil
}

func readPrivateKey(path string) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: no PRIVATE KEY PEM block", path)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	key, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: holds a %T, want an Ed25519 key", path, parsed)
	}
	return key, nil
}

// createPrivateKey writes a new key without ever replacing an existing file:
// when another run got there first, its key is used instead.
func createPrivateKey(path string) (ed25519.PrivateKey, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate Ed25519 key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	tmp, err := writeTemp(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); errors.Is(err, fs.ErrExist) {
		return readPrivateKey(path)
	} else if err != nil {
		return nil, err
	}
	return key, nil
}

func writeAtomically(path string, data []byte, perm os.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// writeTemp writes data to a new file next to path and returns its name.
func writeTemp(path string, data []byte, perm os.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return "", err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(f.Name(), perm)); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}

func mint(key ed25519.PrivateKey, o options, now time.Time) (string, error) {
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return "", err
	}
	claims := jwt.MapClaims{
		"iss":         o.issuer,
		"aud":         o.audience,
		"sub":         o.subject,
		o.tenantClaim: o.tenant,
		"iat":         now.Unix(),
		"nbf":         now.Unix(),
		"exp":         now.Add(o.ttl).Unix(),
		"jti":         hex.EncodeToString(jti),
	}
	if o.scope != "" {
		claims["scope"] = o.scope
	}
	token := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	token.Header["kid"] = o.kid
	signed, err := token.SignedString(key)
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	return signed, nil
}
