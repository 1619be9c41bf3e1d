package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// maxRSABits keeps a hostile JWKS from making every verification expensive.
const maxRSABits = 8192

// maxPEMBytes bounds a PEM key file; a public key or certificate is far smaller.
const maxPEMBytes = 64 << 10

// verificationKey is a public key with where it came from.
type verificationKey struct {
	kid string
	key crypto.PublicKey
	// alg is the JWK's "alg" when the JWKS pins one; empty means any allowed
	// algorithm that fits the key type.
	alg    string
	source string
}

// algKeyCheck says whether a public key may verify an algorithm's signatures.
type algKeyCheck func(crypto.PublicKey) bool

func isRSA(k crypto.PublicKey) bool {
	_, ok := k.(*rsa.PublicKey)
	return ok
}

func isECDSAOn(curve elliptic.Curve) algKeyCheck {
	return func(k crypto.PublicKey) bool {
		ec, ok := k.(*ecdsa.PublicKey)
		return ok && ec.Curve == curve
	}
}

func isEd25519(k crypto.PublicKey) bool {
	ed, ok := k.(ed25519.PublicKey)
	return ok && len(ed) == ed25519.PublicKeySize
}

// supportedAlgs maps each accepted algorithm to the one key type that may verify
// it. The check runs before any signature is verified, so a token can never get
// a key used under an algorithm it was not made for (algorithm confusion).
var supportedAlgs = map[string]algKeyCheck{
	"RS256": isRSA, "RS384": isRSA, "RS512": isRSA,
	"PS256": isRSA, "PS384": isRSA, "PS512": isRSA,
	"ES256": isECDSAOn(elliptic.P256()),
	"ES384": isECDSAOn(elliptic.P384()),
	"ES512": isECDSAOn(elliptic.P521()),
	"EdDSA": isEd25519,
}

func isSupportedAlg(alg string) bool {
	_, ok := supportedAlgs[alg]
	return ok
}

func supportedAlgNames() []string {
	names := make([]string, 0, len(supportedAlgs))
	for name := range supportedAlgs {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// keyFitsAlg reports whether key may verify signatures made with alg.
func keyFitsAlg(key crypto.PublicKey, alg string) bool {
	check, ok := supportedAlgs[alg]
	return ok && check(key)
}

// fitsAnyAlg reports whether key may verify at least one of algs.
func fitsAnyAlg(key crypto.PublicKey, algs []string) bool {
	return slices.ContainsFunc(algs, func(alg string) bool { return keyFitsAlg(key, alg) })
}

// describeKey names a key's type for messages, e.g. "RSA-2048", "ECDSA P-256".
func describeKey(key crypto.PublicKey) string {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return fmt.Sprintf("RSA-%d", k.N.BitLen())
	case *ecdsa.PublicKey:
		return "ECDSA " + k.Curve.Params().Name
	case ed25519.PublicKey:
		return "Ed25519"
	default:
		return fmt.Sprintf("%T", key)
	}
}

// checkPublicKey refuses key types and sizes this package does not verify with.
func checkPublicKey(key crypto.PublicKey) error {
	switch k := key.(type) {
	case *rsa.PublicKey:
		bits := k.N.BitLen()
		if bits < MinRSABits {
			return fmt.Errorf("RSA key has %d bits, fewer than the %d required", bits, MinRSABits)
		}
		if bits > maxRSABits {
			return fmt.Errorf("RSA key has %d bits, more than the %d accepted", bits, maxRSABits)
		}
		if k.E < 3 || k.E%2 == 0 {
			return fmt.Errorf("RSA key has invalid public exponent %d", k.E)
		}
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
		default:
			return fmt.Errorf("ECDSA key on unsupported curve %s", k.Curve.Params().Name)
		}
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return fmt.Errorf("Ed25519 key has %d bytes, want %d", len(k), ed25519.PublicKeySize)
		}
	default:
		return fmt.Errorf("unsupported key type %T (want RSA, ECDSA or Ed25519)", key)
	}
	return nil
}

// loadPEMKeys reads one public key from each file and refuses the whole set on
// the first bad file, a duplicate kid, or a key no allowed algorithm can use.
func loadPEMKeys(paths, algs []string) (map[string]verificationKey, error) {
	keys := make(map[string]verificationKey, len(paths))
	for _, path := range paths {
		k, err := loadPEMKey(path)
		if err != nil {
			return nil, err
		}
		if prev, dup := keys[k.kid]; dup {
			return nil, fmt.Errorf("PEM files %s and %s both give kid %q", prev.source, path, k.kid)
		}
		if !fitsAnyAlg(k.key, algs) {
			return nil, fmt.Errorf("PEM file %s: %s key fits none of the allowed algorithms %v", path, describeKey(k.key), algs)
		}
		keys[k.kid] = k
	}
	return keys, nil
}

func loadPEMKey(path string) (verificationKey, error) {
	kid := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	if kid == "" || kid == "." {
		return verificationKey{}, fmt.Errorf("PEM file %s: cannot take a kid from its name", path)
	}
	data, err := readSmallFile(path, maxPEMBytes)
	if err != nil {
		return verificationKey{}, fmt.Errorf("PEM file %s: %w", path, err)
	}
	key, err := parsePEMPublicKey(data)
	if err != nil {
		return verificationKey{}, fmt.Errorf("PEM file %s: %w", path, err)
	}
	return verificationKey{kid: kid, key: key, source: path}, nil
}

func readSmallFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return data, nil
}

// parsePEMPublicKey takes exactly one PEM block holding a public key or a
// certificate. Private keys are refused so that one never sits where only
// public material is expected.
func parsePEMPublicKey(data []byte) (crypto.PublicKey, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("no PEM block found")
	}
	if next, _ := pem.Decode(rest); next != nil {
		return nil, fmt.Errorf("holds more than one PEM block (%s, then %s); give one key per file", block.Type, next.Type)
	}
	var (
		key crypto.PublicKey
		err error
	)
	switch {
	case block.Type == "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case block.Type == "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case block.Type == "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			key = cert.PublicKey
		}
	case strings.Contains(block.Type, "PRIVATE KEY"):
		return nil, fmt.Errorf("holds a %s; configure its public key instead", block.Type)
	default:
		return nil, fmt.Errorf("PEM block type %q is not a public key or certificate", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", block.Type, err)
	}
	if err := checkPublicKey(key); err != nil {
		return nil, err
	}
	return key, nil
}
