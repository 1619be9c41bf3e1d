package pipeline

import (
	"container/list"
	"sync"

	"github.com/segmentio/kafka-go"
)

// resultCache remembers the encoded events of recently handled requests, so a
// redelivered request is answered with the same bytes and no model call. It
// is bounded by entry count and total bytes, evicting the least recently used.
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
	msgs []kafka.Message
	size int
}

func newResultCache(maxItems, maxBytes int) *resultCache {
	return &resultCache{maxItems: maxItems, maxBytes: maxBytes, order: list.New(), byID: map[string]*list.Element{}}
}

func (c *resultCache) get(id string) ([]kafka.Message, bool) {
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
	return el.Value.(*cacheEntry).msgs, true
}

func (c *resultCache) put(id string, msgs []kafka.Message) {
	if c.maxItems <= 0 {
		return
	}
	size := 0
	for _, m := range msgs {
		size += len(m.Key) + len(m.Value)
		for _, h := range m.Headers {
			size += len(h.Key) + len(h.Value)
		}
	}
	if size > c.maxBytes {
		return // one huge result must not flush everything else
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byID[id]; ok {
		c.bytes -= el.Value.(*cacheEntry).size
		c.order.Remove(el)
	}
	c.byID[id] = c.order.PushFront(&cacheEntry{id: id, msgs: msgs, size: size})
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
