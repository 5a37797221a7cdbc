package audio

import (
	"encoding/binary"
	"errors"
	"io"
)

// FFmpeg's MP4 demuxer builds its index of every sample while it reads
// the header (stsz) and each fragment (trun), allocating for every sample
// a box declares before reading them (a trun declaring 4M samples in a
// 1 KB file raised the peak RSS by 34 MB), so a tiny hostile file could
// make it allocate gigabytes before any check of ours runs. mp4Samples walks the box tree
// with small reads first (CONTRACT.md audio.container-input) and sums the
// samples the sample tables and fragments declare, so an upload declaring
// more packets than the model's limit allows is refused before FFmpeg
// sees it.

const (
	// maxMP4Boxes bounds the boxes walked (Safari's fragmented MP4 of a
	// long recording has a few thousand).
	maxMP4Boxes = 100000
	// maxMP4Depth bounds the nesting walked (moov/trak/mdia/minf/stbl/stsz
	// is 6 deep).
	maxMP4Depth = 8
)

// errMP4Boxes is a box tree beyond maxMP4Boxes or maxMP4Depth.
var errMP4Boxes = errors.New("too many or too deeply nested boxes")

// mp4Containers are the boxes walked into on the way to the sample
// tables and fragments.
var mp4Containers = map[string]bool{"moov": true, "trak": true, "mdia": true, "minf": true, "stbl": true, "moof": true, "traf": true}

// mp4Samples returns the samples the stsz, stz2 and trun boxes of the
// size-byte MP4 src declare, over every track and fragment. A box that
// overruns the file ends the walk (FFmpeg reports what it makes of it).
func mp4Samples(src io.ReaderAt, size int64) (int64, error) {
	var total int64
	boxes := 0
	var walk func(off, end int64, depth int) error
	walk = func(off, end int64, depth int) error {
		if depth > maxMP4Depth {
			return errMP4Boxes
		}
		var h [16]byte
		for off+8 <= end {
			if boxes++; boxes > maxMP4Boxes {
				return errMP4Boxes
			}
			n, _ := src.ReadAt(h[:], off)
			if n < 8 {
				return nil
			}
			box, typ, head := int64(binary.BigEndian.Uint32(h[:4])), string(h[4:8]), int64(8)
			switch box {
			case 0:
				box = end - off
			case 1:
				if n < 16 {
					return nil
				}
				box, head = int64(binary.BigEndian.Uint64(h[8:])), 16
			}
			if box < head || box > end-off {
				return nil
			}
			switch {
			case mp4Containers[typ]:
				if err := walk(off+head, off+box, depth+1); err != nil {
					return err
				}
			case typ == "stsz" || typ == "stz2" || typ == "trun":
				// stsz: version/flags, sample_size, sample_count;
				// stz2: version/flags, reserved and field size, sample_count;
				// trun: version/flags, sample_count.
				at := off + head + 8
				if typ == "trun" {
					at = off + head + 4
				}
				var c [4]byte
				if n, _ := src.ReadAt(c[:], at); n == 4 && at+4 <= off+box {
					total += int64(binary.BigEndian.Uint32(c[:]))
				}
			}
			off += box
		}
		return nil
	}
	err := walk(0, size, 0)
	return total, err
}
