package schemas

import (
	"fmt"
	"time"
)

// nativeReader reads a decoded record. The first problem sticks in *err,
// naming the field's path; later reads return zero values.
type nativeReader struct {
	path string
	rec  map[string]any
	err  *error
}

func (r nativeReader) at(field string) string {
	if r.path == "" {
		return field
	}
	return r.path + "." + field
}

func (r nativeReader) fail(field, format string, args ...any) {
	if *r.err == nil {
		*r.err = fmt.Errorf("field %s: %s", r.at(field), fmt.Sprintf(format, args...))
	}
}

// presence says how a field may be absent.
type presence uint8

const (
	// required: present and not null.
	required presence = iota
	// nullable: a ["null", T] union; null, or missing from an older writer's
	// schema, reads as absent.
	nullable
	// defaulted: a plain field with a default (arrays, options); missing from
	// an older writer's schema reads as absent.
	defaulted
)

// value returns a field's value, with a nullable field's union unwrapped.
func (r nativeReader) value(field string, p presence) (v any, present bool) {
	v, ok := r.rec[field]
	switch {
	case !ok && p == required:
		r.fail(field, "missing")
		return nil, false
	case !ok:
		return nil, false
	case v == nil && p == nullable:
		return nil, false
	case v == nil:
		r.fail(field, "null")
		return nil, false
	}
	if p == nullable {
		u, ok := v.(map[string]any)
		if !ok || len(u) != 1 {
			r.fail(field, "is a %T, want a union value", v)
			return nil, false
		}
		for _, inner := range u {
			return inner, true
		}
	}
	return v, true
}

func get[T any](r nativeReader, field string, p presence) (T, bool) {
	var zero T
	v, ok := r.value(field, p)
	if !ok {
		return zero, false
	}
	t, ok := v.(T)
	if !ok {
		r.fail(field, "is a %T, want %T", v, zero)
		return zero, false
	}
	return t, true
}

func (r nativeReader) str(field string) string {
	s, _ := get[string](r, field, required)
	return s
}

func (r nativeReader) optStr(field string) *string {
	if s, ok := get[string](r, field, nullable); ok {
		return &s
	}
	return nil
}

func (r nativeReader) boolean(field string) bool {
	b, _ := get[bool](r, field, required)
	return b
}

// defaultedInt reads an integer field with a default; a writer that lacks
// it wrote 0.
func (r nativeReader) defaultedInt(field string) int {
	n, _ := r.integer(field, defaulted)
	return n
}

// defaultedBool reads a boolean field with a default; a writer that lacks
// it wrote false.
func (r nativeReader) defaultedBool(field string) bool {
	b, _ := get[bool](r, field, defaulted)
	return b
}

func (r nativeReader) optBoolean(field string) *bool {
	if b, ok := get[bool](r, field, nullable); ok {
		return &b
	}
	return nil
}

func (r nativeReader) integer(field string, p presence) (int, bool) {
	v, ok := r.value(field, p)
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case int32:
		return int(n), true
	case int64:
		return int(n), true
	}
	r.fail(field, "is a %T, want an int", v)
	return 0, false
}

func (r nativeReader) int(field string) int {
	n, _ := r.integer(field, required)
	return n
}

func (r nativeReader) optInt(field string) *int {
	if n, ok := r.integer(field, nullable); ok {
		return &n
	}
	return nil
}

func (r nativeReader) long(field string) int64 {
	n, _ := r.integer(field, required)
	return int64(n)
}

func (r nativeReader) optDouble(field string) *float64 {
	if f, ok := get[float64](r, field, nullable); ok {
		return &f
	}
	return nil
}

func (r nativeReader) time(field string) time.Time {
	t, _ := get[time.Time](r, field, required)
	return t.UTC()
}

// bytes copies, since goavro hands out slices of the buffer it decoded.
func (r nativeReader) bytes(field string) []byte {
	b, _ := get[[]byte](r, field, required)
	return append([]byte{}, b...)
}

func (r nativeReader) optBytes(field string) []byte {
	if b, ok := get[[]byte](r, field, nullable); ok {
		return append([]byte{}, b...)
	}
	return nil
}

func (r nativeReader) record(field string, p presence) (nativeReader, bool) {
	m, ok := get[map[string]any](r, field, p)
	return nativeReader{path: r.at(field), rec: m, err: r.err}, ok
}

// array returns the items of an array field; a field the writer lacks reads
// as empty, as its default says.
func (r nativeReader) array(field string) []any {
	items, _ := get[[]any](r, field, defaulted)
	return items
}

// strs reads an array of strings; a field the writer lacks reads as nil.
func (r nativeReader) strs(field string) []string {
	var out []string
	for i, item := range r.array(field) {
		s, ok := item.(string)
		if !ok {
			r.fail(fmt.Sprintf("%s[%d]", field, i), "is a %T, want a string", item)
		}
		out = append(out, s)
	}
	return out
}

// item reads the record at index i of an array field.
func (r nativeReader) item(field string, i int, v any) nativeReader {
	m, ok := v.(map[string]any)
	path := fmt.Sprintf("%s[%d]", r.at(field), i)
	if !ok {
		if *r.err == nil {
			*r.err = fmt.Errorf("field %s: is a %T, want a record", path, v)
		}
	}
	return nativeReader{path: path, rec: m, err: r.err}
}
