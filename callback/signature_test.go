package callback

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestVerify(t *testing.T) {
	now := time.Unix(1_740_821_400, 0)
	body := []byte(`{"request_id":"req-1"}`)
	ts := "1740821400"
	good := Sign(testSecret, ts, body)
	for _, tc := range []struct {
		name      string
		timestamp string
		signature string
		body      []byte
		now       time.Time
		want      string // "" when valid
	}{
		{"valid", ts, good, body, now, ""},
		{"valid, within tolerance", ts, good, body, now.Add(4 * time.Minute), ""},
		{"valid among rotated secrets", ts, Sign([]byte("old secret, also at least 32 bytes"), ts, body) + "," + good, body, now, ""},
		{"tampered body", ts, good, []byte(`{"request_id":"req-2"}`), now, "no v1 signature matches the body"},
		{"timestamp replaced", "1740821401", good, body, now, "no v1 signature matches the body"},
		{"stale", ts, good, body, now.Add(6 * time.Minute), "over the tolerance of 5m0s"},
		{"from the future", ts, good, body, now.Add(-6 * time.Minute), "over the tolerance"},
		{"timestamp not a number", "yesterday", good, body, now, `timestamp "yesterday" is not unix seconds`},
		{"unknown version only", ts, "v0=" + strings.TrimPrefix(good, "v1="), body, now, "no v1= entry"},
		{"not hex", ts, "v1=zz", body, now, "no v1 signature matches"},
		{"empty", ts, "", body, now, "no v1= entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(testSecret, tc.timestamp, tc.signature, tc.body, tc.now, 5*time.Minute)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Verify: %v, want valid", err)
			case tc.want != "" && (!errors.Is(err, ErrInvalidSignature) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Verify: %v, want ErrInvalidSignature saying %q", err, tc.want)
			}
		})
	}
}

// The value matches Python's hmac.new(secret, b"1740821400." + body, hashlib.sha256).hexdigest().
func ExampleSign() {
	secret := []byte("an example secret of at least 32 bytes")
	body := []byte(`{"request_id":"req-1"}`)
	fmt.Println(Sign(secret, "1740821400", body))
	// Output:
	// v1=d2c1a9857eabf8baf2ef3047c6febfe1e8aedbeff5b052997a70e711fe209278
}
