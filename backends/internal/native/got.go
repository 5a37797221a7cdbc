package native

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

var (
	cDladdr   func(addr uintptr, info unsafe.Pointer) int32
	cMprotect func(addr, n uintptr, prot int32) int32
	extraOnce sync.Once
	extraErr  error
)

func loadExtra() error {
	extraOnce.Do(func() {
		h, err := Open("the C library", "libc.so.6")
		if err == nil {
			err = Bind(h, &cDladdr, "dladdr", &cMprotect, "mprotect")
		}
		extraErr = err
	})
	if extraErr != nil {
		return extraErr
	}
	return loadLibc()
}

// PatchImport rebinds the library's import of importName (its GOT slot,
// found from the ELF relocations) to replacement, so that the library and
// only that library calls replacement instead. anySym is any symbol the
// library defines (to locate it in memory). The GOT of a BIND_NOW library
// is read-only after loading (RELRO): the page is made writable for the
// store and its protection restored. Call it once, before other threads use
// the library; it is not safe for concurrent use.
func PatchImport(lib uintptr, anySym, importName string, replacement uintptr) error {
	if err := loadExtra(); err != nil {
		return err
	}
	addr, err := Sym(lib, anySym)
	if err != nil {
		return err
	}
	info := Malloc(32) // Dl_info: dli_fname, dli_fbase, dli_sname, dli_saddr
	defer Free(info)
	if cDladdr(addr, info) == 0 {
		return fmt.Errorf("native: dladdr(%s) failed", anySym)
	}
	path := GoString(Ptr(Uintptr(info, 0)))
	base := Uintptr(info, 8)
	off, err := importSlot(path, importName)
	if err != nil {
		return err
	}
	slot := base + off
	const page = 4096
	start := slot &^ (page - 1)
	prot, err := protectionOf(start)
	if err != nil {
		return err
	}
	if cMprotect(start, page, prot|2 /* PROT_WRITE */) != 0 {
		return fmt.Errorf("native: mprotect of %s's GOT failed", path)
	}
	*(*uintptr)(Ptr(slot)) = replacement
	if cMprotect(start, page, prot) != 0 {
		return fmt.Errorf("native: restoring the protection of %s's GOT failed", path)
	}
	return nil
}

// importSlot returns the GOT offset (from the load base) that the library
// at path relocates for symbol name.
func importSlot(path, name string) (uintptr, error) {
	f, err := elf.Open(path)
	if err != nil {
		return 0, fmt.Errorf("native: %w", err)
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 {
		return 0, fmt.Errorf("native: %s: only x86-64 ELF is supported", path)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return 0, fmt.Errorf("native: %s: %w", path, err)
	}
	for _, sec := range []string{".rela.plt", ".rela.dyn"} {
		s := f.Section(sec)
		if s == nil {
			continue
		}
		d, err := s.Data()
		if err != nil {
			return 0, err
		}
		for i := 0; i+24 <= len(d); i += 24 {
			off := f.ByteOrder.Uint64(d[i:])
			info := f.ByteOrder.Uint64(d[i+8:])
			typ, si := elf.R_X86_64(info&0xffffffff), int(info>>32)
			if (typ == elf.R_X86_64_JMP_SLOT || typ == elf.R_X86_64_GLOB_DAT) && si > 0 && si-1 < len(syms) && syms[si-1].Name == name {
				return uintptr(off), nil
			}
		}
	}
	return 0, fmt.Errorf("native: %s imports no %s", path, name)
}

// protectionOf returns the PROT_* bits of the mapping holding addr.
func protectionOf(addr uintptr) (int32, error) {
	fh, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || uint64(addr) < a || uint64(addr) >= b {
			continue
		}
		var prot int32
		for i, bit := range []int32{1, 2, 4} {
			if fields[1][i] != '-' {
				prot |= bit
			}
		}
		return prot, nil
	}
	return 0, fmt.Errorf("native: address %#x is not mapped", addr)
}
