package clone_test

import (
	"testing"

	"rulevalidator/internal/clone"
)

func TestPtr(t *testing.T) {
	if clone.Ptr[int](nil) != nil {
		t.Error("Ptr(nil) is not nil")
	}
	n := 3
	p := clone.Ptr(&n)
	if p == &n || *p != 3 {
		t.Errorf("Ptr(&3) = %p (%d), want a copy of 3", p, *p)
	}
}

func TestOrNil(t *testing.T) {
	if clone.OrNil([]int{}) != nil || clone.OrNil([]int(nil)) != nil {
		t.Error("an empty slice is not copied as nil")
	}
	s := []int{1, 2}
	c := clone.OrNil(s)
	c[0] = 9
	if s[0] != 1 || len(c) != 2 {
		t.Errorf("OrNil shares its input: %v, %v", s, c)
	}
}
