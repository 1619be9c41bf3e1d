// Package clone copies the pointers and slices an event shares with what it was built from,
// so that the event owns its values.
package clone

import "slices"

// Ptr points at a copy of *p, or is nil for nil.
func Ptr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// OrNil copies s, giving nil for an empty slice, as decoding an event does.
func OrNil[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}
