package docread

import "testing"

// TestRenderSizeCapsEveryPage: a page is rendered at the width asked for
// unless its image would be over MaxRenderSide or MaxRenderPixels; then it
// is the largest image of its aspect within both.
func TestRenderSizeCapsEveryPage(t *testing.T) {
	for _, tc := range []struct {
		name         string
		wPts, hPts   float64
		width        int
		wantW, wantH int
	}{
		{"Letter", 612, 792, 800, 800, 1036},
		{"the largest PDF page, square", 14400, 14400, 1000, 1000, 1000},
		{"a wide strip", 1000, 4, 1000, 1000, 4},
		{"a tall strip: the side cap", 4, 1000, 1000, 32, MaxRenderSide},
		{"a thread: a pixel wide at least", 1, 14400, 2000, 1, MaxRenderSide},
		{"under the side cap, over the area cap", 1000, 4050, 2000, 1987, 8049},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, h := renderSize(tc.wPts, tc.hPts, tc.width)
			if w != tc.wantW || h != tc.wantH {
				t.Errorf("renderSize(%g, %g, %d) = %d × %d, want %d × %d", tc.wPts, tc.hPts, tc.width, w, h, tc.wantW, tc.wantH)
			}
			if w > MaxRenderSide || h > MaxRenderSide || w*h > MaxRenderPixels {
				t.Errorf("%d × %d is over the caps", w, h)
			}
		})
	}
}
