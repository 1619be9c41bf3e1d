package schemas

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// The binary check walks an Avro body along its schema without building
// anything. It runs before goavro decodes, so that malformed input fails
// with the byte offset and field path of the problem, and so that no
// length or block count can claim more bytes than the body holds.

// binaryError is a malformed body: what is wrong, where, and in which field.
type binaryError struct {
	offset int
	msg    string
	path   []string // innermost first, as the walk unwinds
}

func (e *binaryError) Error() string {
	var b strings.Builder
	for i := len(e.path) - 1; i >= 0; i-- {
		p := e.path[i]
		if b.Len() > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	msg := fmt.Sprintf("avro: %s at byte offset %d", e.msg, e.offset)
	if b.Len() > 0 {
		msg += " (" + b.String() + ")"
	}
	return msg
}

type binaryChecker struct {
	buf  []byte
	pos  int
	base int
}

// checkBinary checks that body holds exactly one value of s. Offsets in
// errors count from base.
func checkBinary(s *shape, body []byte, base int) error {
	c := &binaryChecker{buf: body, base: base}
	if err := c.check(s, 0); err != nil {
		return err
	}
	if c.pos != len(body) {
		return c.errorf(c.pos, "%d unexpected bytes after the record", len(body)-c.pos)
	}
	return nil
}

func (c *binaryChecker) errorf(pos int, format string, args ...any) *binaryError {
	return &binaryError{offset: c.base + pos, msg: fmt.Sprintf(format, args...)}
}

func (c *binaryChecker) long(what string) (int64, error) {
	start := c.pos
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if c.pos >= len(c.buf) {
			return 0, c.errorf(start, "%s cut short", what)
		}
		if shift > 63 {
			return 0, c.errorf(start, "%s is a varint longer than 10 bytes", what)
		}
		b := c.buf[c.pos]
		c.pos++
		v |= uint64(b&0x7f) << shift
		if b&0x80 == 0 {
			break
		}
	}
	return int64(v>>1) ^ -int64(v&1), nil
}

// length reads a byte count or block count and checks that what it counts
// fits in the rest of the body (every array item and map entry takes at
// least one byte in the schemas read here).
func (c *binaryChecker) length(what string) (int, error) {
	start := c.pos
	n, err := c.long(what)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, c.errorf(start, "negative %s %d", what, n)
	}
	if rest := len(c.buf) - c.pos; n > int64(rest) {
		return 0, c.errorf(start, "%s %d exceeds the %d bytes left", what, n, rest)
	}
	return int(n), nil
}

func (c *binaryChecker) check(s *shape, depth int) error {
	if depth > maxNesting {
		return c.errorf(c.pos, "values nested deeper than %d", maxNesting)
	}
	start := c.pos
	switch s.kind {
	case kindNull:
		return nil
	case kindBoolean:
		if c.pos >= len(c.buf) {
			return c.errorf(start, "boolean cut short")
		}
		if b := c.buf[c.pos]; b > 1 {
			return c.errorf(start, "boolean byte is 0x%02x, not 0 or 1", b)
		}
		c.pos++
	case kindInt:
		n, err := c.long("int")
		if err != nil {
			return err
		}
		if n < math.MinInt32 || n > math.MaxInt32 {
			return c.errorf(start, "int %d out of range", n)
		}
	case kindLong:
		_, err := c.long("long")
		return err
	case kindFloat, kindDouble, kindFixed:
		size := s.size
		switch s.kind {
		case kindFloat:
			size = 4
		case kindDouble:
			size = 8
		}
		if len(c.buf)-c.pos < size {
			return c.errorf(start, "value of %d bytes cut short", size)
		}
		c.pos += size
	case kindBytes:
		n, err := c.length("bytes length")
		if err != nil {
			return err
		}
		c.pos += n
	case kindString:
		return c.text("string")
	case kindEnum:
		n, err := c.long("enum index")
		if err != nil {
			return err
		}
		if n < 0 || n >= int64(s.symbols) {
			return c.errorf(start, "enum index %d out of range (%d symbols)", n, s.symbols)
		}
	case kindUnion:
		n, err := c.long("union branch")
		if err != nil {
			return err
		}
		if n < 0 || n >= int64(len(s.branches)) {
			return c.errorf(start, "union branch %d out of range (%d branches)", n, len(s.branches))
		}
		return c.check(s.branches[n], depth+1)
	case kindRecord:
		for _, f := range s.fields {
			if err := c.check(f.shape, depth+1); err != nil {
				var be *binaryError
				if errors.As(err, &be) {
					be.path = append(be.path, f.name)
				}
				return err
			}
		}
	case kindArray, kindMap:
		return c.blocks(s, depth)
	}
	return nil
}

// text skips a length-prefixed UTF-8 string.
func (c *binaryChecker) text(what string) error {
	n, err := c.length(what + " length")
	if err != nil {
		return err
	}
	if data := c.buf[c.pos : c.pos+n]; !utf8.Valid(data) {
		for i := 0; i < len(data); {
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size <= 1 {
				return c.errorf(c.pos+i, "%s is not valid UTF-8", what)
			}
			i += size
		}
	}
	c.pos += n
	return nil
}

// blocks walks an array's or a map's blocks.
func (c *binaryChecker) blocks(s *shape, depth int) error {
	index := 0
	for {
		start := c.pos
		count, err := c.long("block count")
		if err != nil {
			return err
		}
		if count == 0 {
			return nil
		}
		if count < 0 {
			// A negative count is followed by the block's size in bytes.
			if count == math.MinInt64 {
				return c.errorf(start, "block count %d out of range", count)
			}
			count = -count
			if _, err := c.length("block size"); err != nil {
				return err
			}
		}
		if rest := len(c.buf) - c.pos; count > int64(rest) {
			return c.errorf(start, "block count %d exceeds the %d bytes left", count, rest)
		}
		for range count {
			if s.kind == kindMap {
				if err := c.text("map key"); err != nil {
					return err
				}
			}
			if err := c.check(s.items, depth+1); err != nil {
				var be *binaryError
				if errors.As(err, &be) {
					be.path = append(be.path, fmt.Sprintf("[%d]", index))
				}
				return err
			}
			index++
		}
	}
}
