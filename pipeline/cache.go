package pipeline

import (
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"rulevalidator/judging"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// published is what judging one request built for publishing: its encoded
// events, and what to report once they are written.
type published struct {
	msgs []stream.Record
	// req is the request's envelope: the cache holds many of these, and a
	// document can be megabytes.
	req      *schemas.Request
	out      judging.Events
	judgeErr error // the permanent failure, when the request failed
	stored   bool  // the result is in Config.Results
}

// envelope is req without the text of its inputs (documents' content and
// pages, the text input): what a finished request is reported and
// remembered by.
func envelope(req *schemas.Request) *schemas.Request {
	e := *req
	e.PrimaryDocs, e.AuxiliaryDocs = withoutText(req.PrimaryDocs), withoutText(req.AuxiliaryDocs)
	e.TextInput = nil
	return &e
}

func withoutText(docs []schemas.Document) []schemas.Document {
	if docs == nil {
		return nil
	}
	out := make([]schemas.Document, len(docs))
	for i, d := range docs {
		out[i] = schemas.Document{Name: d.Name, URI: d.URI, ContentType: d.ContentType}
	}
	return out
}

func (p *published) size() int {
	if p == nil {
		return 0
	}
	size := 0
	for _, m := range p.msgs {
		size += len(m.Key) + len(m.Value)
		for _, h := range m.Headers {
			size += len(h.Key) + len(h.Value)
		}
	}
	return size
}

// resultCache remembers the encoded events of requests by request id: the
// recently completed ones, so a redelivered request is answered with the same
// bytes and no model call, and those whose publishing failed, so the retry
// re-sends what was built. It is bounded by entry count and total bytes,
// evicting the least recently used.
type resultCache struct {
	mu       sync.Mutex
	maxBytes int
	bytes    int                           // of the entries held; the LRU's evictions subtract theirs
	lru      *simplelru.LRU[string, sized] // nil: the cache is off
}

// sized is a cached result with the bytes it counts against maxBytes.
type sized struct {
	res  *published
	size int
}

func newResultCache(maxItems, maxBytes int) *resultCache {
	c := &resultCache{maxBytes: maxBytes}
	if maxItems > 0 {
		// Cannot fail: the size is positive.
		c.lru, _ = simplelru.NewLRU(maxItems, func(_ string, e sized) { c.bytes -= e.size })
	}
	return c
}

func (c *resultCache) get(id string) (*published, bool) {
	if c.lru == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.lru.Get(id)
	return e.res, ok
}

// remove forgets id.
func (c *resultCache) remove(id string) {
	if c.lru == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(id)
}

func (c *resultCache) put(id string, res *published) {
	if c.lru == nil {
		return
	}
	size := res.size()
	if size > c.maxBytes {
		return // one huge result must not flush everything else
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(id) // an older result for id gives its bytes back
	c.lru.Add(id, sized{res: res, size: size})
	c.bytes += size
	for c.bytes > c.maxBytes {
		c.lru.RemoveOldest()
	}
}

func (c *resultCache) len() int {
	if c.lru == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
