package subscription

import "context"

type depthKey struct{}

// WithDepth marks ctx as a triggered bot's run at depth d (1 for a bot a
// client's write triggered): the writes it makes through the gate carry it.
func WithDepth(ctx context.Context, d int) context.Context {
	return context.WithValue(ctx, depthKey{}, d)
}

// DepthOf is the trigger chain depth of ctx: 0 for a client's request.
func DepthOf(ctx context.Context) int {
	d, _ := ctx.Value(depthKey{}).(int)
	return d
}
