package stream

import (
	"strings"
	"testing"
)

// Java's org.apache.kafka.common.utils.Utils.murmur2 of these keys, as Kafka's own UtilsTest
// lists them; the default partitioner puts a key in toPositive(hash) % partitions.
var javaMurmur2 = []struct {
	key  string
	hash int32
}{
	{"21", -973932308},
	{"foobar", -790332482},
	{"a-little-bit-long-string", -985981536},
	{"a-little-bit-longer-string", -1486304829},
	{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
	{"abc", 479470107},
}

func TestPartitionMatchesJavaDefaultPartitioner(t *testing.T) {
	for _, tc := range javaMurmur2 {
		for _, n := range []int{1, 2, 3, 6, 7, 12, 100} {
			// toPositive masks the sign bit; it is not Math.abs.
			want := int(uint32(tc.hash)&0x7fffffff) % n
			if got := Partition([]byte(tc.key), n); got != want {
				t.Errorf("Partition(%q, %d) = %d, want %d (Java murmur2 %d)", tc.key, n, got, want, tc.hash)
			}
		}
	}
}

func TestPartitionEmptyKeyIsStable(t *testing.T) {
	first := Partition([]byte{}, 6)
	for range 10 {
		if got := Partition(nil, 6); got != first {
			t.Fatalf("Partition(nil, 6) = %d, then %d: an empty key must always land on one partition", first, got)
		}
	}
}

func TestWriterConfigValidate(t *testing.T) {
	client := mustClient(t, "127.0.0.1:9092")
	tests := []struct {
		name string
		cfg  WriterConfig
		want []string
	}{
		{"no client, no topics", WriterConfig{}, []string{"Client is nil", "Topics is empty"}},
		{"empty topic", WriterConfig{Client: client, Topics: []string{"a", ""}}, []string{"Topics[1] is empty"}},
		{"bad numbers", WriterConfig{Client: client, Topics: []string{"a"}, BatchTimeout: -1, WriteTimeout: -1, MaxAttempts: -1},
			[]string{"BatchTimeout must not be negative", "WriteTimeout must be positive", "MaxAttempts must be positive"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.setDefaults()
			err := cfg.Validate()
			if err == nil {
				t.Fatal("Validate accepted the config")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestRecordSizeBoundsTheWireSize(t *testing.T) {
	r := Record{Key: []byte("k"), Value: make([]byte, 1000), Headers: []Header{{Key: "h", Value: []byte("v")}}}
	if got := r.Size(); got < 1000+1+2 || got > 1000+200 {
		t.Errorf("Size() = %d for a 1000-byte value: want the payload plus a small framing allowance", got)
	}
	if v, ok := HeaderValue([]Header{{Key: "a", Value: []byte("1")}, {Key: "a", Value: []byte("2")}}, "a"); !ok || string(v) != "2" {
		t.Errorf("HeaderValue = %q, %v: want the last one", v, ok)
	}
}

func mustClient(t *testing.T, brokers ...string) *Client {
	t.Helper()
	c, err := NewClient(ClientConfig{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
