package schemas

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"rulevalidator/internal/opsscript"
	"strings"
	"testing"
)

// pyclientsPython is the interpreter of the virtualenv ops/pyclients.sh
// makes, under the cache directory ops/lib.sh uses.
func pyclientsPython() string {
	cache := os.Getenv("RULEVALIDATOR_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "rulevalidator")
	}
	return filepath.Join(cache, "pyclients", "venv", "bin", "python")
}

// requirePython returns the interpreter with fastavro, or skips the test
// saying why; with RULEVALIDATOR_REQUIRE_INTEGRATION=1 it fails instead.
func requirePython(t *testing.T) string {
	t.Helper()
	python := pyclientsPython()
	out, err := exec.Command(python, "-c", "import fastavro").CombinedOutput()
	if err == nil {
		return python
	}
	msg := "fastavro is not importable with " + python + " (" + strings.TrimSpace(firstLine(string(out), err)) + "); run ops/pyclients.sh install"
	opsscript.Unavailable(t, "Python interop", "%s", msg)
	return ""
}

func firstLine(out string, err error) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; last != "" {
		return last
	}
	return err.Error()
}

type fastavroView struct {
	Record      json.RawMessage `json:"record"`
	Canonical   string          `json:"canonical"`
	Fingerprint string          `json:"fingerprint"`
}

// TestInteropFastavro has fastavro read every sample event, checks each
// field against what was written and the schema's canonical form and
// fingerprint against ours, then reads back what fastavro writes.
func TestInteropFastavro(t *testing.T) {
	python := requirePython(t)
	c := newTestCodecs(t)
	script, err := filepath.Abs("testdata/interop/check.py")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, name := range avroFileNames() {
		text, _ := avroFiles.ReadFile(name)
		s, err := newSchema(string(text))
		if err != nil {
			t.Fatal(err)
		}
		files[s.Name()] = name
	}
	for _, tc := range sampleEvents() {
		t.Run(tc.name, func(t *testing.T) {
			schema := mustSchema(t, c, tc.ev.SchemaName())
			body, err := c.Marshal(tc.ev)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			message, rewritten := filepath.Join(dir, "message.avro"), filepath.Join(dir, "rewritten.avro")
			if err := os.WriteFile(message, body, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(python, script, files[schema.Name()], message, "--rewrite", rewritten)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("check.py: %v\n%s", err, stderr.String())
			}
			var view fastavroView
			if err := json.Unmarshal(out, &view); err != nil {
				t.Fatalf("check.py output: %v\n%s", err, out)
			}
			if view.Canonical != schema.Canonical() {
				t.Errorf("canonical forms differ\nfastavro: %s\n  goavro: %s", view.Canonical, schema.Canonical())
			}
			if view.Fingerprint != schema.FingerprintHex() {
				t.Errorf("fingerprint: fastavro %s, ours %s", view.Fingerprint, schema.FingerprintHex())
			}

			native, err := tc.ev.native()
			if err != nil {
				t.Fatal(err)
			}
			var got, want any
			if err := json.Unmarshal(view.Record, &got); err != nil {
				t.Fatal(err)
			}
			wantJSON, err := json.Marshal(plainView(native))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(wantJSON, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("fastavro read\n%s\nwant\n%s", view.Record, wantJSON)
			}

			back, err := os.ReadFile(rewritten)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, body) {
				t.Errorf("fastavro wrote different bytes:\n%x\nwant\n%x", back, body)
			}
			decoded, err := c.Unmarshal(schema.Name(), back)
			if err != nil {
				t.Fatalf("reading what fastavro wrote: %v", err)
			}
			assertEqual(t, decoded, tc.ev)
		})
	}
}

// plainView turns goavro's native form into what check.py prints: unions
// unwrapped, bytes in hex (timestamps are already milliseconds).
func plainView(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 1 {
			for k, inner := range x {
				if isUnionBranch(k) {
					return plainView(inner)
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, inner := range x {
			out[k] = plainView(inner)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, inner := range x {
			out[i] = plainView(inner)
		}
		return out
	case []byte:
		return hex.EncodeToString(x)
	}
	return v
}

// isUnionBranch tells a goavro union value ({"string": "x"}) from a record
// with one field: branch names are type names, our field names never are.
func isUnionBranch(key string) bool {
	switch key {
	case "string", "boolean", "int", "long", "double", "bytes", "array":
		return true
	}
	return strings.HasPrefix(key, Namespace+".")
}
