package native

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Deterministic rand for libraries that draw noise from libc rand().
//
// flite's clustergen vocoder (mixed excitation) and espeak-ng take noise
// from rand(), one process-global sequence: the same text gives different
// samples on every call, and parallel sessions perturb each other. The
// contract's matched-output check needs the same bytes for the same input
// at any slot count, so PatchImport rebinds such a library's rand import to
// RandFunc, which steps a private generator of the calling thread, seeded
// for every synthesis by WithSeededRand.
//
// RandFunc is a dozen x86-64 instructions generated at run time: it finds
// the thread's state with pthread_getspecific and steps a 64-bit LCG, so it
// costs a few nanoseconds per sample and never enters Go. Where executable
// memory cannot be had (or off amd64) it is a purego callback into Go,
// which is correct but slower (a Go entry and a gettid per call).

// LCG constants (Knuth's MMIX).
const (
	lcgMul = 6364136223846793005
	lcgInc = 1442695040888963407
)

var (
	randOnce sync.Once
	randFn   uintptr
	randJIT  bool

	pthreadKey  uint32
	setSpecific func(key uint32, value unsafe.Pointer) int32

	randStates sync.Map // callback variant: thread id (int) -> *uint64

	fallbackMu    sync.Mutex
	fallbackState uint64 = 1
)

// RandFunc returns the C function (created once per process) of the
// deterministic rand replacement.
func RandFunc() uintptr {
	randOnce.Do(func() {
		if fn, err := jitRand(); err == nil {
			randFn, randJIT = fn, true
			return
		}
		randFn = purego.NewCallback(randCallback)
	})
	return randFn
}

// jitRand builds the native rand replacement.
func jitRand() (uintptr, error) {
	if runtime.GOARCH != "amd64" {
		return 0, fmt.Errorf("native: no generated rand on %s", runtime.GOARCH)
	}
	if err := loadExtra(); err != nil {
		return 0, err
	}
	libc, err := Open("the C library", "libc.so.6")
	if err != nil {
		return 0, err
	}
	var keyCreate func(key unsafe.Pointer, destructor uintptr) int32
	var mmap func(addr uintptr, n uintptr, prot, flags, fd int32, off int64) uintptr
	if err := Bind(libc, &keyCreate, "pthread_key_create", &setSpecific, "pthread_setspecific", &mmap, "mmap"); err != nil {
		return 0, err
	}
	getSpecific, err := Sym(libc, "pthread_getspecific")
	if err != nil {
		return 0, err
	}
	libcRand, err := Sym(libc, "rand")
	if err != nil {
		return 0, err
	}
	k := Malloc(4)
	defer Free(k)
	if keyCreate(k, 0) != 0 {
		return 0, fmt.Errorf("native: pthread_key_create failed")
	}
	pthreadKey = *(*uint32)(k)
	code := randCode(pthreadKey, getSpecific, libcRand)
	const page = 4096
	const protRW, protRX = 3, 5
	const mapPrivateAnon = 0x02 | 0x20
	mem := mmap(0, page, protRW, mapPrivateAnon, -1, 0)
	if mem == 0 || mem == ^uintptr(0) {
		return 0, fmt.Errorf("native: mmap for generated code failed")
	}
	copy(unsafe.Slice((*byte)(Ptr(mem)), len(code)), code)
	if cMprotect(mem, page, protRX) != 0 {
		return 0, fmt.Errorf("native: executable memory refused")
	}
	return mem, nil
}

// randCode is x86-64 machine code for
//
//	int rand(void) {
//	    uint64_t *s = pthread_getspecific(key);
//	    if (!s) return libc_rand();          // outside WithSeededRand
//	    *s = *s * lcgMul + lcgInc;
//	    return (int)(*s >> 33);
//	}
func randCode(key uint32, getSpecific, libcRand uintptr) []byte {
	var b []byte
	emit := func(bs ...byte) { b = append(b, bs...) }
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	u64 := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	emit(0x53)                      // push rbx (aligns the stack for the call)
	emit(0xBF)                      // mov edi, key
	u32(key)                        //
	emit(0x48, 0xB8)                // movabs rax, pthread_getspecific
	u64(uint64(getSpecific))        //
	emit(0xFF, 0xD0)                // call rax
	emit(0x48, 0x85, 0xC0)          // test rax, rax
	emit(0x74, 0x00)                // je fallback (patched below)
	je := len(b) - 1                //
	emit(0x48, 0x8B, 0x08)          // mov rcx, [rax]
	emit(0x48, 0xBA)                // movabs rdx, lcgMul
	u64(lcgMul)                     //
	emit(0x48, 0x0F, 0xAF, 0xCA)    // imul rcx, rdx
	emit(0x48, 0xBA)                // movabs rdx, lcgInc
	u64(lcgInc)                     //
	emit(0x48, 0x01, 0xD1)          // add rcx, rdx
	emit(0x48, 0x89, 0x08)          // mov [rax], rcx
	emit(0x48, 0xC1, 0xE9, 0x21)    // shr rcx, 33
	emit(0x89, 0xC8)                // mov eax, ecx
	emit(0x5B)                      // pop rbx
	emit(0xC3)                      // ret
	b[je] = byte(len(b) - (je + 1)) // fallback:
	emit(0x5B)                      // pop rbx
	emit(0x48, 0xB8)                // movabs rax, rand
	u64(uint64(libcRand))           //
	emit(0xFF, 0xE0)                // jmp rax
	return b
}

func randCallback() int32 {
	if v, ok := randStates.Load(syscall.Gettid()); ok {
		return next(v.(*uint64))
	}
	// A call outside WithSeededRand (not expected): still deterministic
	// per process, never racy.
	fallbackMu.Lock()
	defer fallbackMu.Unlock()
	return next(&fallbackState)
}

// next steps the LCG and returns 31 bits, like rand()'s 0..RAND_MAX.
func next(s *uint64) int32 {
	*s = *s*lcgMul + lcgInc
	return int32(*s >> 33)
}

// WithSeededRand runs f on a locked OS thread whose rand replacement starts
// from seed, so every native call in f that draws from a patched rand sees
// the same sequence for the same seed, whatever runs on other threads.
func WithSeededRand(seed uint64, f func()) {
	RandFunc()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if randJIT {
		st := Malloc(8)
		defer Free(st)
		*(*uint64)(st) = seed
		setSpecific(pthreadKey, st)
		defer setSpecific(pthreadKey, nil)
		f()
		return
	}
	tid := syscall.Gettid()
	st := seed
	randStates.Store(tid, &st)
	defer randStates.Delete(tid)
	f()
}

var (
	libcRandOnce sync.Once
	libcSrand    func(seed uint32)
	libcRandErr  error
	libcRandMu   sync.Mutex
)

// WithLibcRand is the fallback where PatchImport failed: it runs f holding
// one process-wide lock after srand(seed), so f sees a fixed rand sequence
// (at the price of running alone among such callers).
func WithLibcRand(seed uint32, f func()) error {
	libcRandOnce.Do(func() {
		h, err := Open("the C library", "libc.so.6")
		if err == nil {
			err = Bind(h, &libcSrand, "srand")
		}
		libcRandErr = err
	})
	if libcRandErr != nil {
		return libcRandErr
	}
	libcRandMu.Lock()
	defer libcRandMu.Unlock()
	libcSrand(seed)
	f()
	return nil
}
