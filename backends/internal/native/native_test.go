package native

import (
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

func TestCMemory(t *testing.T) {
	p := CString("hello")
	if GoString(p) != "hello" {
		t.Fatal(GoString(p))
	}
	Free(p)
	arr := CStrings([]string{"a", "bc"})
	slots := unsafe.Slice((*unsafe.Pointer)(arr), 3)
	if GoString(slots[0]) != "a" || GoString(slots[1]) != "bc" || slots[2] != nil {
		t.Fatal("argv layout")
	}
	FreeCStrings(arr, 2)
	if _, err := Open("a hint", "libdoes-not-exist.so.9"); err == nil {
		t.Fatal("opened a missing library")
	}
}

func want(seed uint64, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = next(&seed)
	}
	return out
}

// TestRandFunc: the replacement rand gives each WithSeededRand its own
// sequence, equal to the Go generator's, also with concurrent callers.
func TestRandFunc(t *testing.T) {
	fn := RandFunc()
	draw := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			r, _, _ := purego.SyscallN(fn)
			out[i] = int32(r)
		}
		return out
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 50 {
				seed := uint64(g*1000 + round)
				var got []int32
				WithSeededRand(seed, func() { got = draw(64) })
				exp := want(seed, 64)
				for i := range got {
					if got[i] != exp[i] || got[i] < 0 {
						errs <- "sequence differs"
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	t.Logf("generated code: %v", randJIT)
	draw(3) // outside WithSeededRand: falls through to libc rand
}

func TestRandCallbackVariant(t *testing.T) {
	tid := syscall.Gettid()
	st := uint64(7)
	randStates.Store(tid, &st)
	got := []int32{randCallback(), randCallback()}
	randStates.Delete(tid)
	if exp := want(7, 2); got[0] != exp[0] || got[1] != exp[1] {
		t.Fatalf("%v want %v", got, exp)
	}
	_ = randCallback() // fallback state
}

func TestRandCode(t *testing.T) {
	code := randCode(3, 0x1122334455667788, 0x99aabbccddeeff00)
	if code[0] != 0x53 || code[len(code)-2] != 0xFF || code[len(code)-1] != 0xE0 {
		t.Fatalf("prologue/epilogue: % x", code)
	}
	if len(code) > 4096 {
		t.Fatal("code larger than its page")
	}
}
