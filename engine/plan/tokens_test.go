package plan

import "testing"

// TestWantsPromptSamplesOnceSettled: every prompt is counted until the
// ratio has settled, then one in settledSampleEvery.
func TestWantsPromptSamplesOnceSettled(t *testing.T) {
	e := NewEstimator()
	for i := range settledAfter {
		if !e.WantsPrompt("m") {
			t.Fatalf("prompt %d not counted before the ratio settled", i+1)
		}
		e.ObservePrompt("m", 1000, 1200)
	}
	counted := 0
	for range 10 * settledSampleEvery {
		if e.WantsPrompt("m") {
			counted++
		}
	}
	if counted != 10 {
		t.Errorf("%d of %d prompts counted once settled, want 10", counted, 10*settledSampleEvery)
	}
	if !e.WantsPrompt("other") {
		t.Error("a model never seen is not counted")
	}
}
