package sherpa

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/sluice-dev/sluice/backends"
)

// ONNX structure, read in Go before the library sees a file. ONNX Runtime
// and sherpa-onnx end the process on some malformed models (a failed check
// calls exit, an uncaught C++ exception aborts), so every model file is
// parsed here first: the protobuf wire format completely (a truncated or
// corrupt file fails), then the graph's input and output names and the
// model's metadata, which the family's table (families.go) checks.

// onnxInfo is what the checks read from a model file.
type onnxInfo struct {
	Inputs, Outputs []string
	// OutDims are each output's declared dimensions (-1 where symbolic
	// or absent).
	OutDims      map[string][]int64
	Meta         map[string]string
	Initializers int
	Bytes        int64
}

// errWire marks a file that is not a well-formed protobuf message.
var errWire = errors.New("malformed protobuf")

// wireFields walks the fields of one protobuf message in b, calling fn for
// each with its number, wire type and either its varint value or its
// bytes. Every length is checked against b; groups (deprecated) and
// unknown wire types are errors.
func wireFields(b []byte, fn func(num int, wt int, x uint64, v []byte) error) error {
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return fmt.Errorf("%w: bad field key", errWire)
		}
		b = b[n:]
		num, wt := int(key>>3), int(key&7)
		if num == 0 {
			return fmt.Errorf("%w: field number 0", errWire)
		}
		switch wt {
		case 0:
			x, n := binary.Uvarint(b)
			if n <= 0 {
				return fmt.Errorf("%w: bad varint in field %d", errWire, num)
			}
			b = b[n:]
			if err := fn(num, wt, x, nil); err != nil {
				return err
			}
		case 1, 5:
			w := 8
			if wt == 5 {
				w = 4
			}
			if len(b) < w {
				return fmt.Errorf("%w: field %d truncated", errWire, num)
			}
			if err := fn(num, wt, 0, b[:w]); err != nil {
				return err
			}
			b = b[w:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return fmt.Errorf("%w: field %d length past the end (truncated file?)", errWire, num)
			}
			v := b[n : n+int(l)]
			b = b[n+int(l):]
			if err := fn(num, wt, 0, v); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: wire type %d in field %d", errWire, wt, num)
		}
	}
	return nil
}

// ONNX field numbers (onnx.proto3).
const (
	modelIRVersion = 1
	modelGraph     = 7
	modelMetadata  = 14
	graphNode      = 1
	graphInit      = 5
	graphInput     = 11
	graphOutput    = 12
	graphSparse    = 15
	valueInfoName  = 1
	entryKey       = 1
	entryValue     = 2
	tensorName     = 8
	tensorLocation = 14 // data_location: 1 = EXTERNAL
)

// readONNX parses the model file at path (at most maxBytes; a larger
// file is refused before it is read). Errors wrap backends.ErrInvalid.
func readONNX(path string, maxBytes int64) (onnxInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return onnxInfo{}, backends.Invalidf("%v", err)
	}
	if st.Size() > maxBytes {
		return onnxInfo{}, backends.Invalidf("%s is %d bytes, more than the %d this process may load", path, st.Size(), maxBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return onnxInfo{}, backends.Invalidf("%v", err)
	}
	info, err := parseONNX(b)
	if err != nil {
		return onnxInfo{}, backends.Invalidf("%s: not a valid ONNX model: %v", path, err)
	}
	info.Bytes = st.Size()
	return info, nil
}

func parseONNX(b []byte) (onnxInfo, error) {
	info := onnxInfo{Meta: map[string]string{}, OutDims: map[string][]int64{}}
	var ir uint64
	graphs := 0
	err := wireFields(b, func(num, wt int, x uint64, v []byte) error {
		switch {
		case num == modelIRVersion && wt == 0:
			ir = x
		case num == modelGraph && wt == 2:
			graphs++
			return parseGraph(v, &info)
		case num == modelMetadata && wt == 2:
			var k, val string
			if err := wireFields(v, func(num, wt int, _ uint64, v []byte) error {
				if wt == 2 && num == entryKey {
					k = string(v)
				} else if wt == 2 && num == entryValue {
					val = string(v)
				}
				return nil
			}); err != nil {
				return err
			}
			info.Meta[k] = val
		}
		return nil
	})
	switch {
	case err != nil:
		return info, err
	case ir < 3 || ir > 20:
		return info, fmt.Errorf("ir_version %d outside 3..20", ir)
	case graphs != 1:
		return info, fmt.Errorf("%d graphs, want 1", graphs)
	case len(info.Outputs) == 0:
		return info, fmt.Errorf("the graph has no outputs")
	}
	return info, nil
}

func parseGraph(b []byte, info *onnxInfo) error {
	inits := map[string]bool{}
	var inputs []string
	nodes := 0
	err := wireFields(b, func(num, wt int, _ uint64, v []byte) error {
		if wt != 2 {
			return nil
		}
		switch num {
		case graphNode:
			nodes++
			return wireFields(v, func(int, int, uint64, []byte) error { return nil })
		case graphInput, graphOutput:
			name, dims, err := valueInfo(v)
			if err != nil {
				return err
			}
			if num == graphInput {
				inputs = append(inputs, name)
			} else {
				info.Outputs = append(info.Outputs, name)
				info.OutDims[name] = dims
			}
		case graphInit, graphSparse:
			info.Initializers++
			dense := num == graphInit
			return wireFields(v, func(num, wt int, x uint64, v []byte) error {
				if dense && num == tensorName && wt == 2 {
					inits[string(v)] = true
				}
				if num == tensorLocation && wt == 0 && x == 1 {
					return fmt.Errorf("an initializer keeps its data in an external file (not supported: the catalogue verifies only the listed files)")
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return err
	}
	if nodes == 0 {
		return fmt.Errorf("the graph has no nodes")
	}
	// Models from before IR version 4 list their initializers among the
	// inputs; those are weights, not inputs the library feeds.
	for _, n := range inputs {
		if !inits[n] {
			info.Inputs = append(info.Inputs, n)
		}
	}
	return nil
}

// valueInfo reads a ValueInfoProto's name and, for a tensor, its
// dimensions (type.tensor_type.shape.dim: dim_value, or -1 for a
// dim_param).
func valueInfo(b []byte) (string, []int64, error) {
	var name string
	var dims []int64
	err := wireFields(b, func(num, wt int, _ uint64, v []byte) error {
		switch {
		case num == valueInfoName && wt == 2:
			name = string(v)
		case num == 2 && wt == 2: // type: TypeProto
			return wireFields(v, func(num, wt int, _ uint64, v []byte) error {
				if num != 1 || wt != 2 { // tensor_type
					return nil
				}
				return wireFields(v, func(num, wt int, _ uint64, v []byte) error {
					if num != 2 || wt != 2 { // shape
						return nil
					}
					return wireFields(v, func(num, wt int, _ uint64, v []byte) error {
						if num != 1 || wt != 2 { // dim
							return nil
						}
						d := int64(-1)
						err := wireFields(v, func(num, wt int, x uint64, _ []byte) error {
							if num == 1 && wt == 0 && x < 1<<40 {
								d = int64(x)
							}
							return nil
						})
						dims = append(dims, d)
						return err
					})
				})
			})
		}
		return nil
	})
	if err == nil && name == "" {
		err = fmt.Errorf("a graph input or output has no name")
	}
	return name, dims, err
}
