package pipeline

import (
	"container/list"
	"sync"

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
	out      Outcome
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
	maxItems int
	maxBytes int
	bytes    int
	order    *list.List // front = most recent
	byID     map[string]*list.Element
}

type cacheEntry struct {
	id   string
	res  *published
	size int
}

func newResultCache(maxItems, maxBytes int) *resultCache {
	return &resultCache{maxItems: maxItems, maxBytes: maxBytes, order: list.New(), byID: map[string]*list.Element{}}
}

func (c *resultCache) get(id string) (*published, bool) {
	if c.maxItems <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byID[id]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).res, true
}

// remove forgets id.
func (c *resultCache) remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byID[id]; ok {
		c.bytes -= el.Value.(*cacheEntry).size
		c.order.Remove(el)
		delete(c.byID, id)
	}
}

func (c *resultCache) put(id string, res *published) {
	if c.maxItems <= 0 {
		return
	}
	size := res.size()
	if size > c.maxBytes {
		return // one huge result must not flush everything else
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byID[id]; ok {
		c.bytes -= el.Value.(*cacheEntry).size
		c.order.Remove(el)
	}
	c.byID[id] = c.order.PushFront(&cacheEntry{id: id, res: res, size: size})
	c.bytes += size
	for c.order.Len() > c.maxItems || c.bytes > c.maxBytes {
		el := c.order.Back()
		e := el.Value.(*cacheEntry)
		c.order.Remove(el)
		delete(c.byID, e.id)
		c.bytes -= e.size
	}
}

func (c *resultCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
