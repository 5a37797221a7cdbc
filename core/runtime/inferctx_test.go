package runtime

import (
	"context"
	"errors"
	"sync"
	"testing"
)

type ctxKey struct{}

// inferCtx behaves as context.WithCancel(caller) cancelled also by work,
// whether or not Done was ever called.
func TestInferCtx(t *testing.T) {
	errGone := errors.New("client gone")
	t.Run("caller ends first, Done never called", func(t *testing.T) {
		caller, cancel := context.WithCancelCause(context.WithValue(context.Background(), ctxKey{}, 7))
		c := newInferCtx(caller, context.Background())
		defer c.release()
		if c.Err() != nil || c.Value(ctxKey{}) != 7 {
			t.Fatalf("fresh: err %v value %v", c.Err(), c.Value(ctxKey{}))
		}
		cancel(errGone)
		if !errors.Is(c.Err(), context.Canceled) || !errors.Is(context.Cause(c), errGone) {
			t.Fatalf("after the caller ended: err %v cause %v", c.Err(), context.Cause(c))
		}
		if c.merged.Load() != nil {
			t.Fatal("merged without need")
		}
	})
	t.Run("work ends first, Done never called", func(t *testing.T) {
		work, stop := context.WithCancel(context.Background())
		c := newInferCtx(context.WithValue(context.Background(), ctxKey{}, 7), work)
		defer c.release()
		stop()
		if !errors.Is(c.Err(), context.Canceled) || !errors.Is(context.Cause(c), context.Canceled) {
			t.Fatalf("after work ended: err %v cause %v", c.Err(), context.Cause(c))
		}
		<-c.Done() // already closed
		if c.Value(ctxKey{}) != 7 {
			t.Fatal("value lost by the merge")
		}
	})
	t.Run("Done first, then each end closes it", func(t *testing.T) {
		for _, workEnds := range []bool{false, true} {
			caller, cancelCaller := context.WithCancel(context.Background())
			work, stopWork := context.WithCancel(context.Background())
			c := newInferCtx(caller, work)
			done := c.Done()
			if workEnds {
				stopWork()
			} else {
				cancelCaller()
			}
			<-done
			if !errors.Is(c.Err(), context.Canceled) {
				t.Fatalf("workEnds=%v: err %v", workEnds, c.Err())
			}
			c.release()
			cancelCaller()
			stopWork()
		}
	})
	t.Run("derived contexts and concurrent use", func(t *testing.T) {
		work, stop := context.WithCancel(context.Background())
		c := newInferCtx(context.Background(), work)
		defer c.release()
		child, cancelChild := context.WithCancel(c) // propagation calls Done
		defer cancelChild()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				<-c.Done()
				_ = c.Err()
			})
		}
		stop()
		<-child.Done()
		wg.Wait()
	})
}
