package pickle

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/big"
	"unsafe"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"
	"github.com/torchmem/torchmem/snapshot"
)

// ReadReference decodes a snapshot pickle with gopickle, the reference
// decoder, and maps it onto the model through the same schema code as the
// streaming decoder. Tests compare the two on every file; it is slower and
// needs about ten times the file size in memory. Opcodes that would import
// or call code are refused here too.
func ReadReference(r io.Reader, path string) (snap *snapshot.Snapshot, err error) {
	defer func() {
		if rec := recover(); rec != nil {
			snap, err = nil, &snapshot.Error{Path: path, Offset: -1, Msg: fmt.Sprintf("reference decoder failed: %v", rec)}
		}
	}()
	u := pickle.NewUnpickler(bufio.NewReaderSize(r, 1<<20))
	u.FindClass = func(module, name string) (interface{}, error) {
		return nil, fmt.Errorf("refusing to import %s.%s", module, name)
	}
	obj, err := u.Load()
	if err != nil {
		return nil, &snapshot.Error{Path: path, Offset: -1, Msg: "reference decoder: " + err.Error()}
	}
	b := snapshot.NewBuilder(snapshot.Source{Path: path})
	sch := newSchema(b)
	c := &refConverter{sch: sch, dicts: map[*types.Dict]value{}, lists: map[*types.List]value{}}
	root := c.convert(obj, 0)
	return sch.assemble(root, snapshot.Source{Path: path}, 0)
}

type refConverter struct {
	sch   *schema
	dicts map[*types.Dict]value
	lists map[*types.List]value
}

func (c *refConverter) convert(o any, depth int) value {
	if depth > 1000 {
		panic("nesting deeper than 1000")
	}
	switch x := o.(type) {
	case nil:
		return value{k: kNone}
	case bool:
		if x {
			return value{k: kBool, n: 1}
		}
		return value{k: kBool}
	case int:
		return value{k: kInt, n: int64(x)}
	case *big.Int:
		switch {
		case x.IsInt64():
			return value{k: kInt, n: x.Int64()}
		case x.Sign() > 0 && x.IsUint64():
			return value{k: kUint, n: int64(x.Uint64())}
		}
		return value{k: kBig, p: unsafe.Pointer(x)}
	case float64:
		return value{k: kFloat, n: int64(math.Float64bits(x))}
	case string:
		return strVal(kStr, x)
	case []byte:
		return strVal(kBytes, string(x))
	case *types.Dict:
		if v, ok := c.dicts[x]; ok {
			return v
		}
		d := &pdict{}
		for _, e := range *x {
			d.keys = append(d.keys, c.convert(e.Key, depth+1))
			d.vals = append(d.vals, c.convert(e.Value, depth+1))
		}
		v := value{k: kDict, p: unsafe.Pointer(d)}
		if d.has("filename") || (d.has("name") && d.has("line")) {
			v = value{k: kFrame, n: int64(c.sch.frame(d))}
		}
		c.dicts[x] = v
		return v
	case *types.List:
		if v, ok := c.lists[x]; ok {
			return v
		}
		l := &plist{}
		for _, it := range *x {
			c.sch.appendItem(l, c.convert(it, depth+1))
		}
		v := value{k: kList, p: unsafe.Pointer(l)}
		c.lists[x] = v
		return v
	case *types.Tuple:
		l := &plist{}
		for _, it := range *x {
			l.items = append(l.items, c.convert(it, depth+1))
		}
		return value{k: kTuple, p: unsafe.Pointer(l)}
	}
	return value{k: kNone}
}
