package pickle

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// decodeWays decodes data with the opcodes one by one, with the general
// fast path alone and with the entry template too; it returns the three
// models, errors and the machines.
func decodeWays(t *testing.T, data []byte) (models [3]*snapshot.Snapshot, errs [3]error, ms [3]*vm) {
	t.Helper()
	for i := range 3 {
		models[i], errs[i] = readPickleWith(bufio.NewReader(bytes.NewReader(data)), snapshot.Source{Path: "x.pickle"},
			snapshot.Options{}.WithDefaults(), int64(len(data)),
			func(v *vm) { ms[i], v.fast.off, v.fast.noTemplate = v, i == 0, i < 2 })
	}
	return models, errs, ms
}

// templateCases are traces whose entries change what a template knows:
// six orders of keys (more than the templates kept), every role the
// template reads, actions it has not seen (an unknown one among them),
// integers of every width (addresses past 2^63, negative sizes of 4 and 6 bytes, 9-byte
// LONG1s), metadata fetched and written afresh, an entry with a key more
// or less, a None where an integer was; and copies in which a memo slot a
// template's key fetches is overwritten (with its own text, with another
// key's, with an integer), which must make it read its keys again.
func templateCases() map[string][]byte {
	f1 := st.D("filename", "train.py", "line", 10, "name", "<module>")
	f2 := st.D("filename", "model.py", "line", 60, "name", "forward")
	shared := st.L(f2, f1)
	orders := [][]string{
		{"action", "addr", "size", "stream", "frames", "time_us", "compile_context", "user_metadata"},
		{"action", "addr", "size", "stream", "time_us", "frames"},
		{"action", "addr", "size", "stream", "frames", "time_us"},
		{"addr", "action", "size", "device_free", "stream", "time_us", "frames", "internal_metadata"},
		{"action", "size", "addr", "stream", "time_us", "frames", "user_metadata", "compile_context"},
		{"time_us", "frames", "stream", "size", "addr", "action"},
	}
	actions := []string{"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map", "segment_unmap", "oom", "snapshot", "no_such_action"}
	var trace []any
	for i := range 4000 {
		order := orders[i/7%len(orders)]
		vals := map[string]any{
			"action":            actions[i/11%len(actions)],
			"addr":              []any{uint64(0x7f0000000000 + i*512), uint64(1<<63) + uint64(i), i % 200, 70000 + i}[i%4],
			"size":              []any{int64(512), int64(-1 - i), int64(1 << 40), 3, int64(1<<31 + i), int64(-1<<40 - i)}[i%6],
			"stream":            []any{0, 7, uint64(0x55d0_0000_0000 + i%3), -1}[i/13%4],
			"frames":            []any{st.L(f1), st.L(), shared, st.L(f1, f2, f1)}[i%4],
			"time_us":           int64(1_754_000_000_000_000) + int64(i),
			"device_free":       int64(1 << 33),
			"compile_context":   "N/A",
			"user_metadata":     []string{"", "step 3", ""}[i%3],
			"internal_metadata": "ckpt",
		}
		d := st.D()
		for _, k := range order {
			d.Set(k, vals[k])
		}
		switch i % 97 {
		case 5:
			d.Set("pool_id", st.Tuple{1, 2})
		case 6:
			d.Keys, d.Vals = d.Keys[:len(d.Keys)-1], d.Vals[:len(d.Vals)-1]
		case 7:
			d.Vals[slices.Index(d.Keys, "size")] = nil
		}
		trace = append(trace, d)
	}
	snap := st.D("segments", st.L(), "device_traces", st.L(st.L(trace...)))
	out := map[string][]byte{}
	for _, proto := range []int{2, 4} {
		data := st.Marshal(snap, proto)
		out[fmt.Sprintf("protocol %d", proto)] = data
		// The memo index of the action key (the first dict whose first key
		// is fetched is the second entry's) and where the entries that
		// start with it start.
		var starts []int
		key := -1
		for i := 0; i+5 < len(data); i++ {
			if data[i] != '}' {
				continue
			}
			at := i + 1
			if data[at] == 0x94 {
				at++
			} else if data[at] == 'q' {
				at += 2
			} else if data[at] == 'r' {
				at += 5
			}
			if data[at] != '(' || at+6 > len(data) {
				continue
			}
			idx := -1
			switch data[at+1] {
			case 'h':
				idx = int(data[at+2])
			case 'j':
				idx = int(binary.LittleEndian.Uint32(data[at+2:]))
			}
			if key < 0 && idx >= 0 {
				key = idx // the second entry's: its keys are fetched, action first
			}
			if key >= 0 && idx == key {
				starts = append(starts, i)
			}
		}
		if key < 0 || len(starts) < 100 {
			panic(fmt.Sprintf("protocol %d: entries not found (%d)", proto, len(starts)))
		}
		idx := binary.LittleEndian.AppendUint32(nil, uint32(key))
		for name, value := range map[string][]byte{
			"its own text": {0x8c, 6, 'a', 'c', 't', 'i', 'o', 'n'},
			"another key":  {0x8c, 4, 's', 'i', 'z', 'e'},
			"an integer":   {'K', 9},
		} {
			bad := data
			for _, at := range []int{starts[len(starts)/2], starts[len(starts)/3], starts[len(starts)/4]} {
				put := slices.Concat(value, []byte{'r'}, idx, []byte{'0'})
				bad = slices.Concat(bad[:at], put, bad[at:])
			}
			out[fmt.Sprintf("protocol %d, first key's slot overwritten with %s", proto, name)] = bad
		}
	}
	return out
}

// TestEntryTemplate: the entry template leaves the model exactly as the
// general fast path and the opcodes one by one leave it, on entries made
// to change what it knows, the cases of the fast path and the generated
// training runs (both shapes); it takes 99% of the generated runs'
// entries. (TestEntryFastPath runs the template, on, against the opcodes
// on every real snapshot and on damaged copies.)
func TestEntryTemplate(t *testing.T) {
	inputs := templateCases()
	for name, data := range entryCases() {
		inputs["fast path case, "+name] = data
	}
	for _, shared := range []bool{false, true} {
		var buf bytes.Buffer
		if _, err := st.WriteTraining(&buf, st.TrainingConfig{TargetBytes: 3 << 20, SharedStacks: shared}); err != nil {
			t.Fatal(err)
		}
		inputs[fmt.Sprintf("generated, shared lists %v", shared)] = buf.Bytes()
	}
	for name, data := range inputs {
		models, errs, ms := decodeWays(t, data)
		for i, way := range []string{"the general fast path", "the template"} {
			got, gerr, want, werr := models[i+1], errs[i+1], models[0], errs[0]
			if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
				t.Errorf("%s: %s's error %v, the opcodes' %v", name, way, gerr, werr)
				continue
			}
			if gerr != nil {
				continue
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), cmp.AllowUnexported(snapshot.Snapshot{})); diff != "" {
				t.Errorf("%s: %s's model differs (-opcodes +%s):\n%s", name, way, way, diff)
			}
		}
		if errs[0] != nil {
			continue
		}
		if ms[1].fast.templated != 0 {
			t.Errorf("%s: the template took %d entries while off", name, ms[1].fast.templated)
		}
		events := 0
		for _, d := range models[2].Devices {
			events += len(d.Events)
		}
		t.Logf("%s: %d of %d entries by the template, %d by the fast path", name, ms[2].fast.templated, events, ms[2].fast.entries)
		// The generated runs: all but the entries that teach it. The
		// made cases: an order of keys in six is taught again (four are
		// kept), and the entries the general path does not take either.
		switch want := map[string]int{
			"generated, shared lists false": events * 99 / 100, "generated, shared lists true": events * 99 / 100,
			"protocol 4": events * 2 / 3, "protocol 4, first key's slot overwritten with its own text": events * 2 / 3,
		}[name]; {
		case ms[2].fast.templated < want:
			t.Errorf("%s: the template took %d of %d entries, want %d or more", name, ms[2].fast.templated, events, want)
		}
	}
}
