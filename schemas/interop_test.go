package schemas

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"rulevalidator/internal/opsscript"
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
			rewritten := filepath.Join(t.TempDir(), "rewritten.avro")
			view := runCheck(t, python, script, files[schema.Name()], body, "--rewrite", rewritten)
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
			checkRecord(t, view, plainView(native))

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

// runCheck has check.py read body, written with the schema in schemaFile,
// passing it args, and returns what it printed.
func runCheck(t *testing.T, python, script, schemaFile string, body []byte, args ...string) fastavroView {
	t.Helper()
	message := filepath.Join(t.TempDir(), "message.avro")
	if err := os.WriteFile(message, body, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, append([]string{script, schemaFile, message}, args...)...)
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
	return view
}

// checkRecord compares the record fastavro read with want, a plainView, as
// JSON values.
func checkRecord(t *testing.T, view fastavroView, want any) {
	t.Helper()
	var got, wantValue any
	if err := json.Unmarshal(view.Record, &got); err != nil {
		t.Fatal(err)
	}
	wantJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(wantJSON, &wantValue); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, wantValue) {
		t.Errorf("fastavro read\n%s\nwant\n%s", view.Record, wantJSON)
	}
}

// TestInteropFastavroVerdictResolution: a reader on the verdict schema
// before passage_id, cited_page_number and problems reads what ours writes,
// and a reader on ours reads what that one wrote, taking the defaults, as
// fastavro resolves schemas (by the rules Java's resolver and the registry's
// compatibility checks follow).
func TestInteropFastavroVerdictResolution(t *testing.T) {
	python := requirePython(t)
	script, err := filepath.Abs("testdata/interop/check.py")
	if err != nil {
		t.Fatal(err)
	}
	citations := []string{"passage_id", "cited_page_number"}
	ours := mustSchema(t, newTestCodecs(t), VerdictSchema)
	previous, err := newSchema(dropFields(t, dropEvidenceFields(t, ours.Text(), citations...), "problems"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	oursFile, previousFile := filepath.Join(dir, "ours.avsc"), filepath.Join(dir, "previous.avsc")
	for file, text := range map[string]string{oursFile: ours.Text(), previousFile: previous.Text()} {
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// withoutCitations is a verdict's native form without the new fields.
	withoutCitations := func(native map[string]any) map[string]any {
		delete(native, "problems")
		for _, e := range native["evidences"].([]any) {
			for _, f := range citations {
				delete(e.(map[string]any), f)
			}
		}
		return native
	}
	v := fullVerdict()
	v.Problems = []string{"the model gave no rationale", `its quote "x" is not in "a.pdf"`}
	native, err := v.native()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("previous reader, our writer", func(t *testing.T) {
		body, err := ours.marshal(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		view := runCheck(t, python, script, oursFile, body, "--reader", previousFile)
		checkRecord(t, view, withoutCitations(plainView(native).(map[string]any)))
	})
	t.Run("our reader, previous writer", func(t *testing.T) {
		native, err := v.native()
		if err != nil {
			t.Fatal(err)
		}
		body, err := previous.codec.BinaryFromNative(nil, withoutCitations(native))
		if err != nil {
			t.Fatal(err)
		}
		old := *v
		old.Problems, old.Evidences = nil, slices.Clone(v.Evidences)
		for i := range old.Evidences {
			old.Evidences[i].PassageID, old.Evidences[i].CitedPageNumber = "", 0
		}
		want, err := old.native()
		if err != nil {
			t.Fatal(err)
		}
		view := runCheck(t, python, script, previousFile, body, "--reader", oursFile)
		checkRecord(t, view, plainView(want))
	})
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
