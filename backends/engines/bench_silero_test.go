package engines

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
)

// sileroVariants are the ONNX Runtime session settings `make bench-silero`
// compares (backends/onnx Options): the default, pool threads allowed to
// spin (ONNX Runtime's own default; it only matters above one intra-op
// thread), one pre-packed weights container per pool, and the CPU
// allocator without its arena.
var sileroVariants = []struct{ name, opts string }{
	{"default", `{}`},
	{"spinning", `{"allow_spinning":true}`},
	{"shared-prepacked", `{"share_prepacked_weights":true}`},
	{"no-arena", `{"disable_cpu_arena":true}`},
}

// BenchmarkSileroOptions measures Silero's requests per second at 1 and 2
// slots under each variant, side by side in one run (`make bench-silero`),
// and fails when a variant's outputs differ from the default's: a setting
// may change the speed, never the bytes.
func BenchmarkSileroOptions(b *testing.B) {
	cat, reg := scan(b)
	cp, ok := cat.Get("silero-v5")
	if !ok {
		b.Fatal("silero-v5 is not in the models root (make models)")
	}
	reqs := standardInputs(b)[cp.Task]
	ctx := context.Background()
	var golden [][]byte
	for _, v := range sileroVariants {
		for _, n := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/slots=%d", v.name, n), func(b *testing.B) {
				spec := SpecFor("silero-v5", cp, n)
				spec.Options = json.RawMessage(v.opts)
				pool, err := OpenPool(ctx, reg[cp.Engine], spec)
				if err != nil {
					b.Fatal(err)
				}
				defer pool.Close(ctx)
				jobs := make([]int, b.N)
				for i := range jobs {
					jobs[i] = i % len(reqs)
				}
				b.ResetTimer()
				cpu0 := cpuTime()
				out, err := pool.Serve(ctx, reqs, jobs)
				if err != nil {
					b.Fatal(err)
				}
				cpu := cpuTime() - cpu0
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
				b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "cpu-ms/req")
				b.ReportMetric(cpu.Seconds()/b.Elapsed().Seconds(), "cores-busy")
				checkSame(b, &golden, out, jobs, len(reqs))
			})
		}
	}
}

// checkSame keeps the first output of each request as the golden one and
// fails when a later output of the same request differs.
func checkSame(b *testing.B, golden *[][]byte, out [][]byte, jobs []int, n int) {
	b.Helper()
	if *golden == nil {
		*golden = make([][]byte, n)
	}
	for i, j := range jobs {
		g := (*golden)[j]
		switch {
		case g == nil:
			(*golden)[j] = out[i]
		case !bytes.Equal(g, out[i]):
			b.Fatalf("request %d: output differs from the first run's:\n%s\n%s", j, g, out[i])
		}
	}
}
