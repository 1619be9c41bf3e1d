package testtier_test

import (
	"testing"

	"rulevalidator/internal/testtier"
)

func TestRealModel(t *testing.T) {
	tests := []struct {
		value string
		want  bool
	}{
		{value: "", want: false},
		{value: "0", want: false},
		{value: "true", want: false},
		{value: "1", want: true},
	}
	for _, tt := range tests {
		t.Run("value="+tt.value, func(t *testing.T) {
			t.Setenv(testtier.EnvRealModel, tt.value)
			if got := testtier.RealModel(); got != tt.want {
				t.Errorf("RealModel() with %s=%q = %v, want %v", testtier.EnvRealModel, tt.value, got, tt.want)
			}
		})
	}
}

func TestRequireRealModelSkipsOutsideTheTier(t *testing.T) {
	t.Setenv(testtier.EnvRealModel, "")
	var ran bool
	// A subtest, so that its skip does not skip this test.
	t.Run("inner", func(t *testing.T) {
		testtier.RequireRealModel(t)
		ran = true
	})
	if ran {
		t.Error("RequireRealModel did not skip with the variable unset")
	}
}

func TestRequireRealModelRunsInTheTier(t *testing.T) {
	t.Setenv(testtier.EnvRealModel, "1")
	var ran bool
	t.Run("inner", func(t *testing.T) {
		testtier.RequireRealModel(t)
		ran = true
	})
	if !ran {
		t.Error("RequireRealModel skipped with the variable set to 1")
	}
}
