package reviews

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"time"
)

// Queue paging limits.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
)

// ErrBadCursor: a cursor that Queue did not write.
var ErrBadCursor = errors.New("reviews: the cursor is not one this service gave")

// QueueQuery filters and pages the queue.
type QueueQuery struct {
	// RulesetID and RuleID keep only the items of that ruleset or rule;
	// "" keeps all.
	RulesetID string
	RuleID    string
	// Limit is the page size (default DefaultPageSize, at most MaxPageSize).
	Limit int
	// Cursor is the Next of the page before; "" for the first page.
	Cursor string
}

// Page is one page of the queue. Next is "" on the last page.
type Page struct {
	Items []Item `json:"items"`
	Next  string `json:"next"`
}

// Queue orders items least confident first (an item without a confidence
// after every item with one: nothing measured it), then oldest first, then
// by request and rule id, and returns the page q asks for. A cursor names
// the last item of its page by that order, so a page is not shifted by
// items added or reviewed meanwhile.
func Queue(items []Item, q QueueQuery) (Page, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultPageSize
	}
	limit = min(limit, MaxPageSize)
	var after *sortKey
	if q.Cursor != "" {
		k, err := decodeCursor(q.Cursor)
		if err != nil {
			return Page{}, err
		}
		after = &k
	}
	kept := make([]Item, 0, len(items))
	for _, it := range items {
		if (q.RulesetID == "" || it.RulesetID == q.RulesetID) && (q.RuleID == "" || it.RuleID == q.RuleID) &&
			(after == nil || compareKeys(keyOf(it), *after) > 0) {
			kept = append(kept, it)
		}
	}
	slices.SortFunc(kept, func(a, b Item) int { return compareKeys(keyOf(a), keyOf(b)) })
	page := Page{Items: kept[:min(limit, len(kept))]}
	if len(kept) > limit {
		page.Next = encodeCursor(keyOf(page.Items[limit-1]))
	}
	return page, nil
}

// sortKey is an item's place in the queue; it is what a cursor holds.
type sortKey struct {
	Confidence *float64 `json:"c,omitempty"`
	JudgedAt   int64    `json:"t"`
	RequestID  string   `json:"r"`
	RuleID     string   `json:"u"`
}

func keyOf(it Item) sortKey {
	return sortKey{Confidence: it.Confidence, JudgedAt: it.JudgedAt.UnixNano(), RequestID: it.RequestID, RuleID: it.RuleID}
}

func compareKeys(a, b sortKey) int {
	switch {
	case a.Confidence != nil && b.Confidence == nil:
		return -1
	case a.Confidence == nil && b.Confidence != nil:
		return 1
	case a.Confidence != nil:
		if c := cmp.Compare(*a.Confidence, *b.Confidence); c != 0 {
			return c
		}
	}
	return cmp.Or(cmp.Compare(a.JudgedAt, b.JudgedAt), cmp.Compare(a.RequestID, b.RequestID), cmp.Compare(a.RuleID, b.RuleID))
}

func encodeCursor(k sortKey) string {
	data, _ := json.Marshal(k) // a struct of plain values always encodes
	return base64.RawURLEncoding.EncodeToString(data)
}

func decodeCursor(s string) (sortKey, error) {
	var k sortKey
	data, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(data) > 2048 || json.Unmarshal(data, &k) != nil {
		return sortKey{}, ErrBadCursor
	}
	return k, nil
}

// Age is how long an item has waited at now, in whole seconds.
func Age(it Item, now time.Time) int64 {
	if it.JudgedAt.IsZero() {
		return 0
	}
	return max(0, int64(now.Sub(it.JudgedAt)/time.Second))
}
