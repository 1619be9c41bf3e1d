package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A handler defers a message it may not handle yet (its tenant is over a budget until a
// window ends) by returning Defer(until, why), when MayDefer(ctx) says it may. The consumer
// then puts the message back where it waited, its room, bytes and place in its partition
// kept, and holds its tenant until then: the tenant's messages are passed over for a free
// slot, as a tenant at its MaxInFlight is, while the others' start. At until the tenant may
// start again, its deferred message first. Its offset, and those after it in its partition,
// are not committed meanwhile; a rebalance lets it go uncommitted, to its next owner.
//
// A held tenant's messages still hold their room while they wait: so that one tenant cannot
// fill the read-ahead and stop the fetching for every other, a held tenant with more than
// Fairness.MaxHeld messages waiting has its oldest started anyway, with MayDefer false: its
// handler must then end it (fail it, dead-lettered) instead.

// DeferredError is what Defer returns: a message that may not be handled before Until.
// It does not wrap Why, so that a permanent mark on Why does not dead-letter the message.
type DeferredError struct {
	Until time.Time
	Why   error
}

func (e *DeferredError) Error() string {
	return fmt.Sprintf("deferred until %s: %v", e.Until.Format(time.RFC3339), e.Why)
}

// Defer returns the error a handler returns to have its message deferred until until, why
// saying why. It is an error like any other when MayDefer(ctx) was false.
func Defer(until time.Time, why error) error { return &DeferredError{Until: until, Why: why} }

// deferred is err's DeferredError, if it is one.
func deferred(err error) (*DeferredError, bool) {
	var d *DeferredError
	return d, errors.As(err, &d)
}

type mayDeferKey struct{}

// withMayDefer marks ctx for a handler that may defer its message.
func withMayDefer(ctx context.Context) context.Context {
	return context.WithValue(ctx, mayDeferKey{}, true)
}

// MayDefer reports whether the handler running with ctx may defer its message (Defer): with
// Fairness, unless its tenant holds too many messages waiting already (Fairness.MaxHeld).
func MayDefer(ctx context.Context) bool {
	may, _ := ctx.Value(mayDeferKey{}).(bool)
	return may
}
