package bucket

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The key scheme's errors begin "objstore:", as they did before the scheme
// moved here from package objstore.

// MaxKeyBytes is S3's limit on the length of an object key.
const MaxKeyBytes = 1024

// MaxSegmentBytes bounds what KeySegment returns: a segment stays within the
// 255 bytes a file name may have on posix-backed stores, with room for a
// fixed suffix such as a file extension.
const MaxSegmentBytes = 200

// KeySegment maps s one to one onto a key segment that cannot leave its
// place in a key: bytes other than A-Z a-z 0-9 - _ . : ~ are written %XX,
// and so is a leading '.' (no "." or ".." segments, no hidden files); an
// escaped form longer than MaxSegmentBytes becomes "%%" and the SHA-256 of
// s in hex, and the empty string "%": no escaped form can be either
// (escaping writes '%' only before two hex digits). Tenant ids, request ids
// and reference ids made of the plain characters are kept as they are.
func KeySegment(s string) string {
	if s == "" {
		return "%"
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9',
			c == '-', c == '_', c == ':', c == '~', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if b.Len() > MaxSegmentBytes {
		sum := sha256.Sum256([]byte(s))
		return "%%" + hex.EncodeToString(sum[:])
	}
	return b.String()
}

// TenantKey is the key prefix/<tenant>/<name>/... of one of a tenant's
// objects (a report, a job's document), the one key scheme of tenant-scoped
// objects: tenant and every name are escaped with KeySegment, so that no
// value, whoever supplied it, reaches outside its place or another tenant's
// prefix, and two different tenants or names never share a key. A fixed
// suffix (a file extension) may be appended to the key and keeps it so.
// prefix may be empty or hold several segments ("reports/v1"); a trailing
// '/' is dropped. It fails for a prefix with an empty, "." or ".." segment
// or a character keys may not hold, and for a key over S3's 1024 bytes.
func TenantKey(prefix, tenant string, names ...string) (string, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	if err := CheckPrefix(prefix); err != nil {
		return "", err
	}
	parts := make([]string, 0, len(names)+2)
	if prefix != "" {
		parts = append(parts, prefix)
	}
	parts = append(parts, KeySegment(tenant))
	for _, n := range names {
		parts = append(parts, KeySegment(n))
	}
	key := strings.Join(parts, "/")
	if len(key) > MaxKeyBytes {
		return "", fmt.Errorf("objstore: key %q is %d bytes, over S3's limit of %d", key, len(key), MaxKeyBytes)
	}
	return key, nil
}

// UnescapedTenantKey is the key prefix/tenant/id/fileName with its parts as
// given, the form reports were stored under before TenantKey escaped them:
// only for reading those. A part that is empty, "." or holds '/', '\',
// "..", control characters or invalid UTF-8 is refused, as it was then.
func UnescapedTenantKey(prefix, tenant, id, fileName string) (string, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	if err := CheckPrefix(prefix); err != nil {
		return "", err
	}
	for _, part := range []struct{ name, value string }{
		{"tenant", tenant}, {"id", id}, {"file name", fileName},
	} {
		if err := checkComponent(part.value); err != nil {
			return "", fmt.Errorf("objstore: %s %q: %w", part.name, part.value, err)
		}
	}
	key := tenant + "/" + id + "/" + fileName
	if prefix != "" {
		key = prefix + "/" + key
	}
	if len(key) > MaxKeyBytes {
		return "", fmt.Errorf("objstore: key %q is %d bytes, over S3's limit of %d", key, len(key), MaxKeyBytes)
	}
	return key, nil
}

// CheckPrefix accepts "" and key prefixes whose segments are all real names.
func CheckPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	for i, seg := range strings.Split(prefix, "/") {
		if err := checkSegment(seg); err != nil {
			return fmt.Errorf("objstore: key prefix %q, segment %d: %w", prefix, i+1, err)
		}
	}
	return nil
}

// CheckKey accepts keys whose '/'-separated segments are all real names. Such keys map
// one to one onto files in a posix-backed store and can't climb out of a prefix.
func CheckKey(key string) error {
	if key == "" {
		return errors.New("key is empty")
	}
	if len(key) > MaxKeyBytes {
		return fmt.Errorf("key is %d bytes, over S3's limit of %d", len(key), MaxKeyBytes)
	}
	for i, seg := range strings.Split(key, "/") {
		if err := checkSegment(seg); err != nil {
			return fmt.Errorf("key %q, segment %d: %w", key, i+1, err)
		}
	}
	return nil
}

func checkSegment(seg string) error {
	switch seg {
	case "":
		return errors.New("empty segment (leading, trailing or doubled '/')")
	case ".", "..":
		return fmt.Errorf("%q is not allowed as a segment", seg)
	}
	return checkText(seg)
}

func checkComponent(s string) error {
	switch {
	case s == "":
		return errors.New("is empty")
	case s == ".":
		return errors.New(`"." is not a name`)
	case strings.Contains(s, ".."):
		return errors.New(`holds ".."`)
	case strings.Contains(s, "/"):
		return errors.New("holds '/'")
	}
	return checkText(s)
}

// checkText refuses invalid UTF-8, control characters and '\', which some tools treat as
// a path separator when an object is saved to disk.
func checkText(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	for i, r := range s {
		switch {
		case unicode.IsControl(r):
			return fmt.Errorf("control character %U at byte %d", r, i)
		case r == '\\':
			return fmt.Errorf("'\\' at byte %d", i)
		}
	}
	return nil
}
