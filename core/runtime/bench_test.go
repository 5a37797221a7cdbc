package runtime

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/fixture"
)

// benchParallelism is the goroutines per GOMAXPROCS of every parallel
// benchmark: more callers than slots at 1, 2 and 4 slots, so admission
// queues and hands off, as a buffered-channel semaphore would.
const benchParallelism = 4

// clockSink keeps the clock reads of the semaphore-clock baseline alive.
var clockSink atomic.Int64

// floorLease is the mutex floor's lease, the size of a runtime Lease;
// leaseSink keeps it on the heap.
type floorLease struct {
	slot int
	_    [64]byte // the rest of a Lease's 80-byte size class
}

var leaseSink atomic.Pointer[floorLease]

// BenchmarkHandoff measures submit, grant and release through the runtime
// on a warm zero-work fixture model at 1, 2, 4 and 16 slots, beside a
// buffered-channel semaphore doing the same handoff, in one run
// ("Performance": at most 2x the semaphore). "acquire" is Acquire plus
// Release; "infer" is a whole Infer on the fixture (zero latency) beside a
// channel of sessions doing the same engine call.
func BenchmarkHandoff(b *testing.B) {
	for _, slots := range []int{1, 2, 4, 16} {
		b.Run(fmt.Sprintf("slots=%d/semaphore", slots), func(b *testing.B) {
			sem := make(chan struct{}, slots)
			b.SetParallelism(benchParallelism)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					sem <- struct{}{}
					<-sem
				}
			})
		})
		// The semaphore plus the two monotonic clock reads every runtime
		// acquire and release makes (one per core event): not the issue's
		// baseline, but it shows how much of the gap is the clock alone.
		b.Run(fmt.Sprintf("slots=%d/semaphore-clock", slots), func(b *testing.B) {
			sem := make(chan struct{}, slots)
			start := time.Now()
			b.SetParallelism(benchParallelism)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var sink time.Duration
				for pb.Next() {
					sink += time.Since(start)
					sem <- struct{}{}
					sink += time.Since(start)
					<-sem
				}
				clockSink.Add(int64(sink))
			})
		})
		// The floor of any design that serialises admission through one
		// lock, as the runtime does around its machine: a counter under a
		// sync.Mutex, a sync.Cond for the callers that find every slot
		// taken, the same two clock reads and a heap-allocated lease.
		b.Run(fmt.Sprintf("slots=%d/mutex-floor", slots), func(b *testing.B) {
			var mu sync.Mutex
			cond := sync.NewCond(&mu)
			busy := 0
			start := time.Now()
			b.SetParallelism(benchParallelism)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var sink time.Duration
				for pb.Next() {
					sink += time.Since(start)
					mu.Lock()
					for busy == slots {
						cond.Wait()
					}
					busy++
					mu.Unlock()
					leaseSink.Store(&floorLease{slot: busy})
					sink += time.Since(start)
					mu.Lock()
					busy--
					cond.Signal()
					mu.Unlock()
				}
				clockSink.Add(int64(sink))
			})
		})
		// runtime-acquire-live is runtime-acquire with the live invariant
		// checks at the server's default (--live-invariants 256), side by
		// side: their overhead.
		for _, live := range []int{0, liveDefault} {
			name := "runtime-acquire"
			if live > 0 {
				name = "runtime-acquire-live"
			}
			b.Run(fmt.Sprintf("slots=%d/%s", slots, name), func(b *testing.B) {
				rt := benchRuntimeLive(b, slots, live)
				b.SetParallelism(benchParallelism)
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						l, err := rt.Acquire(bg, "m", nil)
						if err != nil {
							b.Error(err)
							return
						}
						l.Release(false)
					}
				})
			})
		}
		// runtime-acquire-timeout is runtime-acquire with a bounded
		// admission timeout that never passes: every caller that queues
		// puts its deadline in the runtime's heap and takes it out when
		// granted (deadlines.go), beside runtime-acquire, which has none.
		b.Run(fmt.Sprintf("slots=%d/runtime-acquire-timeout", slots), func(b *testing.B) {
			rt := benchRuntime(b, slots)
			timeout := time.Minute
			b.SetParallelism(benchParallelism)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l, err := rt.Acquire(bg, "m", &timeout)
					if err != nil {
						b.Error(err)
						return
					}
					l.Release(false)
				}
			})
		})
		b.Run(fmt.Sprintf("slots=%d/sessions-infer", slots), func(b *testing.B) {
			fx := fixture.New()
			type slotSession struct {
				s    backends.Session
				slot int
			}
			pool := make(chan slotSession, slots)
			primary, _, err := fx.Open(bg, backends.Spec{Model: "m", Version: 1, Options: []byte(`{}`), Slots: slots})
			if err != nil {
				b.Fatal(err)
			}
			pool <- slotSession{primary, 0}
			for i := 1; i < slots; i++ {
				s, err := primary.Clone(bg, i)
				if err != nil {
					b.Fatal(err)
				}
				pool <- slotSession{s, i}
			}
			b.SetParallelism(benchParallelism)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					x := <-pool
					if _, err := x.s.Infer(bg, backends.Request{Slot: x.slot, Version: 1}, nil); err != nil {
						b.Error(err)
					}
					pool <- x
				}
			})
			b.StopTimer()
			for range slots {
				(<-pool).s.Close(bg)
			}
		})
		b.Run(fmt.Sprintf("slots=%d/runtime-infer", slots), func(b *testing.B) {
			rt := benchRuntime(b, slots)
			b.SetParallelism(benchParallelism)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := rt.Infer(bg, "m", backends.Request{}, InferOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// liveDefault is server.DefaultLiveInvariants (not imported: the server
// imports this package).
const liveDefault = 256

func benchRuntime(b *testing.B, slots int) *Runtime { return benchRuntimeLive(b, slots, 0) }

func benchRuntimeLive(b *testing.B, slots, live int) *Runtime {
	rt, err := New(Options{Engines: backends.Registry{fixture.Name: fixture.New()}, LiveInvariants: live})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Shutdown(bg) })
	if _, err := rt.Apply(bg, "m", spec(slots, `{}`)); err != nil {
		b.Fatal(err)
	}
	return rt
}
