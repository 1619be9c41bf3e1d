package objstore_test

import (
	"strings"
	"testing"

	"rulevalidator/objstore"
)

func TestParseURI(t *testing.T) {
	tests := []struct {
		uri     string
		bucket  string
		key     string
		wantErr string
	}{
		{uri: "s3://reports/acme/42/report.xlsx", bucket: "reports", key: "acme/42/report.xlsx"},
		{uri: "s3://my-bucket.eu/doc.json", bucket: "my-bucket.eu", key: "doc.json"},
		{uri: "s3://reports/a b/é.txt", bucket: "reports", key: "a b/é.txt"},

		{uri: "", wantErr: `URI "": want s3://bucket/key`},
		{uri: "reports/key", wantErr: "want s3://bucket/key"},
		{uri: "S3://reports/key", wantErr: "want s3://bucket/key"},
		{uri: "https://reports.s3.amazonaws.com/key", wantErr: "want s3://bucket/key"},
		{uri: "s3://", wantErr: "has no bucket"},
		{uri: "s3:///key", wantErr: "has no bucket"},
		{uri: "s3://reports", wantErr: "has no key after the bucket"},
		{uri: "s3://reports/", wantErr: "has no key after the bucket"},
		{uri: "s3://Reports/key", wantErr: `bucket "Reports"`},
		{uri: "s3://re/key", wantErr: `bucket "re"`},
		{uri: "s3://reports/../other-bucket/key", wantErr: `segment 1: ".." is not allowed`},
		{uri: "s3://reports/acme/../globex/secret.json", wantErr: `segment 2: ".." is not allowed`},
		{uri: "s3://reports/acme/./x", wantErr: `segment 2: "." is not allowed`},
		{uri: "s3://reports//etc/passwd", wantErr: "segment 1: empty segment"},
		{uri: "s3://reports/acme//x", wantErr: "segment 2: empty segment"},
		{uri: "s3://reports/acme/", wantErr: "segment 2: empty segment"},
		{uri: "s3://reports/acme/x\r\nHost: evil", wantErr: "control character U+000D"},
		{uri: `s3://reports/acme\..\x`, wantErr: `'\' at byte 4`},
		{uri: "s3://reports/" + strings.Repeat("k", 1025), wantErr: "over S3's limit of 1024"},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			bucket, key, err := objstore.ParseURI(tt.uri)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseURI = (%q, %q), want an error containing %q", bucket, key, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %q, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseURI: %v", err)
			}
			if bucket != tt.bucket || key != tt.key {
				t.Fatalf("ParseURI = (%q, %q), want (%q, %q)", bucket, key, tt.bucket, tt.key)
			}
		})
	}
}
