package sndfile

import (
	"encoding/binary"
	"hash/crc32"
)

// libsndfile draws every Ogg file's bitstream serial number at random
// (ogg_stream_init with psf_rand_int32, seeded from the clock) and offers
// no command to set it, so two encodings of the same samples differ in
// every page's serial and CRC. The engine contract wants the same bytes
// for the same request whatever came before, so an encoder's Ogg output
// is rewritten once finished: each logical stream's serial becomes one
// derived from the content (a hash of the pages with serial and CRC
// zeroed; distinct files still get distinct serials, so a client that
// chains two answers gets a valid chained stream) and each page's CRC is
// recomputed.

// oggCRC is Ogg's page checksum table: CRC-32, polynomial 0x04c11db7,
// not reflected, initial value 0, no final xor.
var oggCRC = func() *[256]uint32 {
	var t [256]uint32
	for i := range t {
		r := uint32(i) << 24
		for range 8 {
			if r&0x80000000 != 0 {
				r = r<<1 ^ 0x04c11db7
			} else {
				r <<= 1
			}
		}
		t[i] = r
	}
	return &t
}()

func oggChecksum(b []byte) uint32 {
	var c uint32
	for _, x := range b {
		c = c<<8 ^ oggCRC[byte(c>>24)^x]
	}
	return c
}

// oggPages calls f with each page of b (header and body) in order and
// reports whether b is a whole sequence of well-formed pages.
func oggPages(b []byte, f func(page []byte)) bool {
	for len(b) > 0 {
		if len(b) < 27 || string(b[:4]) != "OggS" || b[4] != 0 {
			return false
		}
		nseg := int(b[26])
		if len(b) < 27+nseg {
			return false
		}
		n := 27 + nseg
		for _, s := range b[27 : 27+nseg] {
			n += int(s)
		}
		if len(b) < n {
			return false
		}
		f(b[:n])
		b = b[n:]
	}
	return true
}

// fixOggSerials rewrites b, a whole Ogg file, in place so its bytes
// depend on its content alone (see above). A file that is not a sequence
// of well-formed pages is left as it is.
func fixOggSerials(b []byte) {
	if !oggPages(b, func([]byte) {}) {
		return
	}
	// The content hash: every page with serial and CRC zeroed.
	h := crc32.NewIEEE()
	var zero [8]byte
	serials := map[uint32]uint32{} // drawn serial -> its stream's number
	oggPages(b, func(p []byte) {
		s := binary.LittleEndian.Uint32(p[14:])
		if _, ok := serials[s]; !ok {
			serials[s] = uint32(len(serials))
		}
		h.Write(p[:14])
		h.Write(zero[:])
		h.Write(p[18:22])
		h.Write(zero[:4])
		h.Write(p[26:])
	})
	base := h.Sum32()
	oggPages(b, func(p []byte) {
		s := binary.LittleEndian.Uint32(p[14:])
		binary.LittleEndian.PutUint32(p[14:], base+serials[s])
		binary.LittleEndian.PutUint32(p[22:], 0)
		binary.LittleEndian.PutUint32(p[22:], oggChecksum(p))
	})
}
