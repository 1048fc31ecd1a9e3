package main

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A look that hangs until its context ends (a call to a Pod IP that went away) costs one
// attempt, not the whole wait: the next look succeeds well before the wait's timeout.
func TestAHungLookCostsOneAttempt(t *testing.T) {
	defer func(was time.Duration) { attemptTimeout = was }(attemptTimeout)
	attemptTimeout = 100 * time.Millisecond
	looks := 0
	err := waitFor(context.Background(), time.Hour, "a member", func(ctx context.Context) error {
		looks++
		if looks == 1 {
			<-ctx.Done()
			return errors.New("status: " + ctx.Err().Error())
		}
		return nil
	})
	if err != nil || looks != 2 {
		t.Fatalf("waitFor = %v after %d looks, want success at the second", err, looks)
	}
}
