// Package snapshottest writes pickles the way CPython and PyTorch's C++
// pickler do, so that tests, fuzz seeds, benchmarks and the demo can make
// snapshots for what the real files lack (other protocols, pending-free
// blocks, private pools, FX frames, hostile opcodes, huge files).
package snapshottest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
)

// Dict is a Python dict with its insertion order. Writing the same *Dict
// twice memoizes it, as CPython does for shared objects (PyTorch shares frame
// dicts between stacks).
type Dict struct {
	Keys []string
	Vals []any
}

// D builds a Dict from alternating keys and values.
func D(kv ...any) *Dict {
	d := &Dict{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Keys = append(d.Keys, kv[i].(string))
		d.Vals = append(d.Vals, kv[i+1])
	}
	return d
}

// Set appends a key (no de-duplication, like gopickle).
func (d *Dict) Set(k string, v any) *Dict {
	d.Keys = append(d.Keys, k)
	d.Vals = append(d.Vals, v)
	return d
}

// List is a Python list; writing the same *List twice memoizes it.
type List struct{ Items []any }

// L builds a List.
func L(items ...any) *List { return &List{Items: items} }

// Tuple is a Python tuple.
type Tuple []any

// Raw is a fragment of opcodes written as is (for hostile inputs).
type Raw []byte

// Writer writes one pickle.
type Writer struct {
	Protocol int
	buf      bytes.Buffer
	memo     map[any]int
	strMemo  map[string]int
	next     int
	bounds   []int // offsets where opcodes start: frames are cut only there
}

// Marshal pickles v with the given protocol (2, 4 or 5 mirror real writers:
// 2 is PyTorch's C++ pickler, 4 and 5 are CPython's defaults).
func Marshal(v any, protocol int) []byte {
	w := &Writer{Protocol: protocol, memo: map[any]int{}, strMemo: map[string]int{}}
	body := w.body(v)
	var out bytes.Buffer
	if protocol >= 2 {
		out.Write([]byte{0x80, byte(protocol)})
	}
	if protocol >= 4 {
		// A FRAME about every 64 KiB, cut at opcode boundaries as CPython's
		// framer does.
		start := 0
		cut := func(end int) {
			out.WriteByte(0x95)
			binary.Write(&out, binary.LittleEndian, uint64(end-start))
			out.Write(body[start:end])
			start = end
		}
		for _, b := range w.bounds {
			if b-start >= 64<<10 {
				cut(b)
			}
		}
		if start < len(body) {
			cut(len(body))
		}
	} else {
		out.Write(body)
	}
	out.WriteByte('.')
	return out.Bytes()
}

func (w *Writer) body(v any) []byte {
	w.value(v)
	return w.buf.Bytes()
}

func (w *Writer) op(b ...byte) {
	w.bounds = append(w.bounds, w.buf.Len())
	w.buf.Write(b)
}

func (w *Writer) memoize() int {
	idx := w.next
	w.next++
	if w.Protocol >= 4 {
		w.op(0x94)
	} else if idx < 256 {
		w.op('q', byte(idx))
	} else {
		w.op('r')
		binary.Write(&w.buf, binary.LittleEndian, uint32(idx))
	}
	return idx
}

func (w *Writer) get(idx int) {
	if idx < 256 {
		w.op('h', byte(idx))
	} else {
		w.op('j')
		binary.Write(&w.buf, binary.LittleEndian, uint32(idx))
	}
}

func (w *Writer) value(v any) {
	switch x := v.(type) {
	case nil:
		w.op('N')
	case bool:
		if x {
			w.op(0x88)
		} else {
			w.op(0x89)
		}
	case int:
		w.int(int64(x))
	case int64:
		w.int(x)
	case uint64:
		if x <= math.MaxInt64 {
			w.int(int64(x))
		} else {
			w.bigInt(new(big.Int).SetUint64(x))
		}
	case *big.Int:
		w.bigInt(x)
	case float64:
		w.op('G')
		binary.Write(&w.buf, binary.BigEndian, math.Float64bits(x))
	case string:
		w.str(x)
	case Raw:
		w.buf.Write(x)
	case Tuple:
		switch len(x) {
		case 0:
			w.op(')')
		case 1, 2, 3:
			for _, it := range x {
				w.value(it)
			}
			w.op(0x84 + byte(len(x)))
		default:
			w.op('(')
			for _, it := range x {
				w.value(it)
			}
			w.op('t')
		}
		w.memoize()
	case *Dict:
		if idx, ok := w.memo[x]; ok {
			w.get(idx)
			return
		}
		w.op('}')
		w.memo[x] = w.memoize()
		w.batches(len(x.Keys), 's', 'u', func(j int) {
			w.str(x.Keys[j])
			w.value(x.Vals[j])
		})
	case *List:
		if idx, ok := w.memo[x]; ok {
			w.get(idx)
			return
		}
		w.op(']')
		w.memo[x] = w.memoize()
		w.batches(len(x.Items), 'a', 'e', func(j int) { w.value(x.Items[j]) })
	case []any:
		w.value(&List{Items: x})
	default:
		panic(fmt.Sprintf("snapshottest: cannot pickle %T", v))
	}
}

// batches writes n items in batches of 1,000 as CPython does: a single item
// with the one-item opcode (APPEND, SETITEM), more between MARK and the
// batch opcode (APPENDS, SETITEMS).
func (w *Writer) batches(n int, one, many byte, item func(j int)) {
	for i := 0; i < n; i += 1000 {
		end := min(n, i+1000)
		if end-i > 1 {
			w.op('(')
		}
		for j := i; j < end; j++ {
			item(j)
		}
		if end-i > 1 {
			w.op(many)
		} else {
			w.op(one)
		}
	}
}

func (w *Writer) int(x int64) {
	switch {
	case x >= 0 && x < 256:
		w.op('K', byte(x))
	case x >= 0 && x < 65536:
		w.op('M')
		binary.Write(&w.buf, binary.LittleEndian, uint16(x))
	case x >= math.MinInt32 && x <= math.MaxInt32:
		w.op('J')
		binary.Write(&w.buf, binary.LittleEndian, int32(x))
	default:
		w.bigInt(big.NewInt(x))
	}
}

// bigInt writes LONG1 with the minimal two's-complement encoding, as CPython.
func (w *Writer) bigInt(x *big.Int) {
	var b []byte
	if x.Sign() == 0 {
		w.op(0x8a, 0)
		return
	}
	n := (x.BitLen() + 8) / 8 // room for the sign bit
	if x.Sign() > 0 {
		be := x.Bytes()
		b = make([]byte, n)
		for i := range be {
			b[i] = be[len(be)-1-i]
		}
	} else {
		mod := new(big.Int).Lsh(big.NewInt(1), uint(8*n))
		be := new(big.Int).Add(mod, x).Bytes()
		b = make([]byte, n)
		for i := range be {
			b[i] = be[len(be)-1-i]
		}
		// Trim redundant 0xff bytes as CPython does.
		for len(b) > 1 && b[len(b)-1] == 0xff && b[len(b)-2]&0x80 != 0 {
			b = b[:len(b)-1]
		}
	}
	// Trim redundant 0x00 bytes for positive numbers.
	for x.Sign() > 0 && len(b) > 1 && b[len(b)-1] == 0 && b[len(b)-2]&0x80 == 0 {
		b = b[:len(b)-1]
	}
	w.op(0x8a, byte(len(b)))
	w.buf.Write(b)
}

func (w *Writer) str(s string) {
	if idx, ok := w.strMemo[s]; ok {
		w.get(idx)
		return
	}
	if w.Protocol >= 4 && len(s) < 256 {
		w.op(0x8c, byte(len(s)))
	} else {
		w.op('X')
		binary.Write(&w.buf, binary.LittleEndian, uint32(len(s)))
	}
	w.buf.WriteString(s)
	w.strMemo[s] = w.memoize()
}
