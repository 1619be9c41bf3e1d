package bucket_test

import (
	"strings"
	"testing"

	"rulevalidator/bucket"
)

// TestKeySegment: escaping keeps plain ids as they are, maps every other
// string one to one onto a segment that cannot climb out of its place in the
// key, and stays within a file name's length.
func TestKeySegment(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"acme", "acme"},
		{"req-1.v2:a~b_c", "req-1.v2:a~b_c"},
		{"mfrggzdfmztwq2lknnwg23tpoa", "mfrggzdfmztwq2lknnwg23tpoa"},
		{".", "%2E"},
		{"..", "%2E."},
		{".hidden", "%2Ehidden"},
		{"a/b", "a%2Fb"},
		{`a\b`, "a%5Cb"},
		{"../acme", "%2E.%2Facme"},
		{"%2F", "%252F"},
		{"%%", "%25%25"},
		{"a b\x00\n", "a%20b%00%0A"},
		{"é", "%C3%A9"},
		{"\xff", "%FF"},
		{"", "%"},
	} {
		if got := bucket.KeySegment(tc.in); got != tc.want {
			t.Errorf("KeySegment(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	long := strings.Repeat("é", 150)
	hashed := bucket.KeySegment(long)
	if !strings.HasPrefix(hashed, "%%") || len(hashed) != 66 {
		t.Errorf("KeySegment of %d bytes = %q, want %%%% and a SHA-256", len(long), hashed)
	}
	if again := bucket.KeySegment(long + "x"); again == hashed {
		t.Error("two long strings share a segment")
	}
	if fits := strings.Repeat("a", bucket.MaxSegmentBytes); bucket.KeySegment(fits) != fits {
		t.Errorf("a %d-byte id was hashed", bucket.MaxSegmentBytes)
	}
}

// TestTenantKey: no tenant or name leaves its tenant's prefix, every key is
// one object storage accepts, pairs that plain concatenation would confuse
// get different keys, and plain tenants and ids keep the key they had before
// escaping (UnescapedTenantKey).
func TestTenantKey(t *testing.T) {
	pairs := [][2]string{
		{"acme", "r1"},
		{"acme/r1", "x"},
		{"acme", "r1/x"},
		{"acme", "../globex/r1"},
		{"..", "acme"},
		{".", "r1"},
		{"acme", "r1.json"},
		{"acme", "r1.json/.."},
		{"acme%2Fr1", "x"},
		{"acme", "%2E%2E"},
		{"acme", ".."},
		{"globex", "r1"},
		{`acme\`, "r1"},
		{"acme", strings.Repeat("r", 600)},
		{strings.Repeat("t", 300), "r1"},
		{"", "r1"},
		{"acme", ""},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		key, err := bucket.TenantKey("jobs", p[0], p[1])
		if err != nil {
			t.Fatalf("TenantKey(%q, %q): %v", p[0], p[1], err)
		}
		if other, dup := seen[key]; dup {
			t.Errorf("tenant %q id %q and tenant %q id %q share the key %q", p[0], p[1], other[0], other[1], key)
		}
		seen[key] = p
		if err := bucket.CheckKey(key); err != nil {
			t.Errorf("tenant %q id %q: key %q is not a valid key: %v", p[0], p[1], key, err)
		}
		segs := strings.Split(key, "/")
		if len(segs) != 3 || segs[0] != "jobs" || segs[1] != bucket.KeySegment(p[0]) || segs[2] != bucket.KeySegment(p[1]) {
			t.Errorf("tenant %q id %q: key %q is not jobs/<tenant>/<id>", p[0], p[1], key)
		}
	}

	for _, tc := range []struct{ tenant, id string }{{"acme", "req-42"}, {"acme.eu", "42"}, {"tenant_7:eu~1", "mfrggzdfmztwq2lknnwg23tpoa"}} {
		escaped, err := bucket.TenantKey("reports/v1/", tc.tenant, tc.id, "report.xlsx")
		if err != nil {
			t.Fatal(err)
		}
		plain, err := bucket.UnescapedTenantKey("reports/v1/", tc.tenant, tc.id, "report.xlsx")
		if err != nil || plain != escaped {
			t.Errorf("tenant %q id %q: TenantKey %q, UnescapedTenantKey %q (%v); plain values keep their key", tc.tenant, tc.id, escaped, plain, err)
		}
	}
	if key, err := bucket.TenantKey("", "acme", "42"); err != nil || key != "acme/42" {
		t.Errorf("no prefix: %q, %v", key, err)
	}

	for _, prefix := range []string{"reports/../secrets", "/reports", "a//b", "rep\x00orts"} {
		if key, err := bucket.TenantKey(prefix, "acme", "42"); err == nil {
			t.Errorf("TenantKey with prefix %q = %q, want an error", prefix, key)
		}
	}
	if key, err := bucket.TenantKey(strings.Repeat("p", 900), "acme", strings.Repeat("r", 200)); err == nil || !strings.Contains(err.Error(), "over S3's limit of 1024") {
		t.Errorf("an overlong key: %q, %v", key, err)
	}
}

func TestUnescapedTenantKey(t *testing.T) {
	tests := []struct {
		name                         string
		prefix, tenant, id, fileName string
		want                         string
		wantErr                      string
	}{
		{name: "plain", prefix: "reports", tenant: "acme", id: "req-42", fileName: "report.xlsx",
			want: "reports/acme/req-42/report.xlsx"},
		{name: "nested prefix, trailing slash dropped", prefix: "reports/v1/", tenant: "acme", id: "42", fileName: "r.xlsx",
			want: "reports/v1/acme/42/r.xlsx"},
		{name: "no prefix", tenant: "acme", id: "42", fileName: "r.xlsx", want: "acme/42/r.xlsx"},
		{name: "dots inside a name are fine", prefix: "reports", tenant: "acme.eu", id: "42", fileName: "report.v2.xlsx",
			want: "reports/acme.eu/42/report.v2.xlsx"},
		{name: "unicode name", prefix: "reports", tenant: "acme", id: "42", fileName: "rapport-été.xlsx",
			want: "reports/acme/42/rapport-été.xlsx"},

		{name: "empty tenant", prefix: "reports", id: "42", fileName: "r.xlsx", wantErr: `tenant "": is empty`},
		{name: "empty id", prefix: "reports", tenant: "acme", fileName: "r.xlsx", wantErr: `id "": is empty`},
		{name: "empty file name", prefix: "reports", tenant: "acme", id: "42", wantErr: `file name "": is empty`},
		{name: "tenant climbs out", prefix: "reports", tenant: "..", id: "42", fileName: "r.xlsx", wantErr: `tenant "..": holds ".."`},
		{name: "tenant names another tenant", prefix: "reports", tenant: "acme/../globex", id: "42", fileName: "r.xlsx",
			wantErr: `tenant "acme/../globex": holds ".."`},
		{name: "tenant with slash", prefix: "reports", tenant: "acme/eu", id: "42", fileName: "r.xlsx", wantErr: `tenant "acme/eu": holds '/'`},
		{name: "id climbs out", prefix: "reports", tenant: "acme", id: "../../x", fileName: "r.xlsx", wantErr: `id "../../x": holds ".."`},
		{name: "file name climbs out", prefix: "reports", tenant: "acme", id: "42", fileName: "../42/r.xlsx", wantErr: `file name "../42/r.xlsx": holds ".."`},
		{name: "file name is a path", prefix: "reports", tenant: "acme", id: "42", fileName: "a/r.xlsx", wantErr: `file name "a/r.xlsx": holds '/'`},
		{name: "file name with dot dot inside", prefix: "reports", tenant: "acme", id: "42", fileName: "r..xlsx", wantErr: `holds ".."`},
		{name: "single dot", prefix: "reports", tenant: "acme", id: ".", fileName: "r.xlsx", wantErr: `id ".": "." is not a name`},
		{name: "backslash", prefix: "reports", tenant: `acme\..\globex`, id: "42", fileName: "r.xlsx", wantErr: `holds ".."`},
		{name: "lone backslash", prefix: "reports", tenant: `acme\globex`, id: "42", fileName: "r.xlsx", wantErr: `'\' at byte 4`},
		{name: "newline", prefix: "reports", tenant: "acme", id: "42\n", fileName: "r.xlsx", wantErr: "control character U+000A at byte 2"},
		{name: "NUL", prefix: "reports", tenant: "acme", id: "42", fileName: "r.xlsx\x00.exe", wantErr: "control character U+0000 at byte 6"},
		{name: "invalid UTF-8", prefix: "reports", tenant: "acme\xff", id: "42", fileName: "r.xlsx", wantErr: "not valid UTF-8"},
		{name: "prefix with traversal", prefix: "reports/../secrets", tenant: "acme", id: "42", fileName: "r.xlsx",
			wantErr: `key prefix "reports/../secrets", segment 2: ".." is not allowed`},
		{name: "prefix with leading slash", prefix: "/reports", tenant: "acme", id: "42", fileName: "r.xlsx",
			wantErr: `key prefix "/reports", segment 1: empty segment`},
		{name: "too long", prefix: "reports", tenant: "acme", id: "42", fileName: strings.Repeat("x", 1020),
			wantErr: "over S3's limit of 1024"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := bucket.UnescapedTenantKey(tt.prefix, tt.tenant, tt.id, tt.fileName)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("UnescapedTenantKey = %q, want an error containing %q", got, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %q, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("UnescapedTenantKey: %v", err)
			}
			if got != tt.want {
				t.Fatalf("UnescapedTenantKey = %q, want %q", got, tt.want)
			}
		})
	}
}
