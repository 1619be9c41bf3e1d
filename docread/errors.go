package docread

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrUnreadable matches every document that cannot be read; the kinds
// below say why.
var ErrUnreadable = errors.New("unreadable document")

// The kinds of unreadable document; an *Error matches ErrUnreadable and one
// of them.
var (
	// ErrEncrypted: the PDF needs a password.
	ErrEncrypted = errors.New("encrypted")
	// ErrCorrupt: the bytes are not the document they claim to be, or are
	// cut short.
	ErrCorrupt = errors.New("corrupt or truncated")
	// ErrNoText: pages hold images but no text (a scan); OCR is not done.
	ErrNoText = errors.New("no text layer")
	// ErrNotDOCX: a zip that is not a Word document, or not a zip.
	ErrNotDOCX = errors.New("not a DOCX")
	// ErrZipBomb: a DOCX that would expand beyond the limits.
	ErrZipBomb = errors.New("zip bomb")
	// ErrTooLarge: over the byte limit.
	ErrTooLarge = errors.New("over the byte limit")
	// ErrTooManyPages: over the page limit.
	ErrTooManyPages = errors.New("over the page limit")
	// ErrUnsupported: a media type that is not read.
	ErrUnsupported = errors.New("unsupported media type")
)

// Error is a document that cannot be read.
type Error struct {
	// Document is the document's name.
	Document string
	// Kind is one of the kind sentinels (ErrEncrypted, ...).
	Kind error
	// Pages are the pages concerned (1-based), for ErrNoText.
	Pages []int
	// Detail says what was found, for a person.
	Detail string
}

func newError(doc string, kind error, format string, args ...any) *Error {
	return &Error{Document: doc, Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	return fmt.Sprintf("document %q cannot be read (%s): %s", e.Document, e.Kind, e.Detail)
}

// Unwrap lets errors.Is match ErrUnreadable and the kind.
func (e *Error) Unwrap() []error { return []error{ErrUnreadable, e.Kind} }

// pageList writes pages as "1, 3-5, 9", at most max ranges, then "and N more".
func pageList(pages []int) string {
	const most = 12
	var parts []string
	for i := 0; i < len(pages); {
		j := i
		for j+1 < len(pages) && pages[j+1] == pages[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(pages[i]))
		} else {
			parts = append(parts, strconv.Itoa(pages[i])+"-"+strconv.Itoa(pages[j]))
		}
		i = j + 1
	}
	if len(parts) > most {
		return strings.Join(parts[:most], ", ") + fmt.Sprintf(" and %d more ranges", len(parts)-most)
	}
	return strings.Join(parts, ", ")
}
