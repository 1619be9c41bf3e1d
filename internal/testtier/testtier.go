// Package testtier says which tier of the test suite a test belongs to, for the tests that
// are not run by default.
//
// The tiers, each one command (see docs/development.md):
//
//   - unit: go test ./... (no services; integration tests skip, saying why);
//   - integration: bash ops/test.sh (real broker, object storage, LibreOffice, promtool and
//     the Python clients, with the scripted model, and one smoke test against the local
//     model);
//   - real model: bash ops/test.sh --real-model, which sets RULEVALIDATOR_REAL_MODEL=1 and so
//     adds the tests that call the local model more than a smoke test does. A release, and a
//     change to the prompt, the local stack or the checks, must pass it.
package testtier

import (
	"os"
	"testing"
)

// EnvRealModel set to 1 runs the real-model tier; ops/test.sh --real-model sets it.
const EnvRealModel = "RULEVALIDATOR_REAL_MODEL"

// RealModel reports whether the real-model tier runs.
func RealModel() bool { return os.Getenv(EnvRealModel) == "1" }

// RequireRealModel skips t unless the real-model tier runs (RULEVALIDATOR_REAL_MODEL=1). Call it
// first in a test that calls the local model for minutes: the integration tier leaves it out.
func RequireRealModel(t testing.TB) {
	t.Helper()
	if !RealModel() {
		t.Skipf("real-model tier: runs only with %s=1 (bash ops/test.sh --real-model); a release and a change to the prompt, the local stack or the checks must pass it", EnvRealModel)
	}
}
