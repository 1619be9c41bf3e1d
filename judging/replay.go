package judging

import "context"

// replayKey is the context key of WithReplay.
type replayKey struct{}

// WithReplay returns ctx saying that the request being judged is replay n of a dead-lettered
// one (its schemas.HeaderReplayCount; 0: not a replay). A replay is judged like any request;
// a result store that counts each request once (usage.ResultStore) counts a replay apart from
// the attempts before it, whose tokens were spent apart.
func WithReplay(ctx context.Context, n int) context.Context {
	if n <= 0 {
		return ctx
	}
	return context.WithValue(ctx, replayKey{}, n)
}

// Replay is the replay count WithReplay put in ctx, 0 when none.
func Replay(ctx context.Context) int {
	n, _ := ctx.Value(replayKey{}).(int)
	return n
}
