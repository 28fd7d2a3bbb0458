package snapshottest

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// TracePlotLayout is the JSON layout of a 2022–23 trace_plot page.
type TracePlotLayout int

// The two layouts python -m torch.cuda._memory_viz trace_plot wrote before
// pages embedded the pickle (2023).
const (
	// TracePlot2022 writes "elements": [{"size", "info"}…] and headers like
	// "1.0MiB allocation".
	TracePlot2022 TracePlotLayout = iota
	// TracePlot2023 writes "elements_size" and "elements_info" and headers
	// that name the block, "b7f0000000000_0 1.0MiB allocation (1048576
	// bytes)"; blocks live at the dump that the trace never allocated are
	// listed as initially allocated.
	TracePlot2023
)

// TracePlotPage writes the HTML page trace_plot of that time made for one
// device of a snapshot dict (as Sim.Snapshot returns): the trace's allocs
// and free_completed entries become elements, shown in the order of the
// trace, their stacks interned as chains of shared suffixes. The page's
// script is a stand-in; the data is what PyTorch's PlotWriter wrote, with
// Python's json.dumps separators.
func TracePlotPage(snap *Dict, device int, layout TracePlotLayout) []byte {
	p := &plotWriter{strIdx: map[string]int{}, sufIdx: map[[2]int]int{}}
	var trace []any
	if dt, ok := get(snap, "device_traces").(*List); ok && device < len(dt.Items) {
		if l, ok := dt.Items[device].(*List); ok {
			trace = l.Items
		}
	}
	live := map[uint64]int{}
	versions := map[uint64]int{}
	header := func(addr uint64, size int64) string {
		if layout == TracePlot2022 {
			return pyFormatSize(size) + " allocation"
		}
		v := versions[addr]
		versions[addr] = v + 1
		return fmt.Sprintf("b%x_%d %s allocation (%d bytes)", addr, v, pyFormatSize(size), size)
	}
	for _, it := range trace {
		e := it.(*Dict)
		addr, size := toU64(get(e, "addr")), toI64(get(e, "size"))
		frames := frameLines(get(e, "frames"))
		switch get(e, "action") {
		case "alloc":
			id := p.element(size, append([]string{header(addr, size)}, frames...))
			live[addr] = id
			p.actions = append(p.actions, id)
		case "free_completed":
			id, ok := live[addr]
			if ok {
				delete(live, addr)
			} else {
				id = p.element(size, append([]string{header(addr, size), "alloc not recorded, stack trace for free:"}, frames...))
				p.initial = append(p.initial, id)
			}
			p.actions = append(p.actions, id)
		}
	}
	if layout == TracePlot2023 {
		segs, _ := get(snap, "segments").(*List)
		for _, sv := range listItems(segs) {
			g := sv.(*Dict)
			if toI64(get(g, "device")) != int64(device) {
				continue
			}
			addr := toU64(get(g, "address"))
			blocks, _ := get(g, "blocks").(*List)
			for _, bv := range listItems(blocks) {
				b := bv.(*Dict)
				size := toI64(get(b, "size"))
				if _, ok := live[addr]; !ok && get(b, "state") == "active_allocated" {
					real := toI64(get(b, "requested_size"))
					frames := frameLines(get(b, "frames"))
					lines := []string{header(addr, real)}
					if len(frames) == 0 {
						lines = append(lines, "<block was allocated before _record_history was enabled>")
					}
					p.initial = append(p.initial, p.element(real, append(lines, frames...)))
				}
				addr += uint64(size)
			}
		}
	}
	var js bytes.Buffer
	js.WriteString(`{"actions": `)
	writeInts(&js, p.actions)
	if layout == TracePlot2022 {
		js.WriteString(`, "elements": [`)
		for i := range p.sizes {
			if i > 0 {
				js.WriteString(", ")
			}
			fmt.Fprintf(&js, `{"size": %d, "info": %d}`, p.sizes[i], p.infos[i])
		}
		js.WriteString("]")
	} else {
		js.WriteString(`, "elements_size": `)
		writeInts(&js, p.sizes)
		js.WriteString(`, "elements_info": `)
		writeInts(&js, p.infos)
		js.WriteString(`, "elements_category": null`)
	}
	js.WriteString(`, "suffix_table": [`)
	for i, s := range p.suffixes {
		if i > 0 {
			js.WriteString(", ")
		}
		next := "null"
		if s[1] >= 0 {
			next = strconv.Itoa(s[1])
		}
		fmt.Fprintf(&js, "[%d, %s]", s[0], next)
	}
	js.WriteString(`], "string_table": [`)
	for i, s := range p.strs {
		if i > 0 {
			js.WriteString(", ")
		}
		js.WriteString(pyJSONString(s))
	}
	js.WriteString(`], "initially_allocated": `)
	rev := make([]int, len(p.initial))
	for i, v := range p.initial {
		rev[len(rev)-1-i] = v
	}
	writeInts(&js, rev)
	if layout == TracePlot2023 {
		js.WriteString(`, "categories": null`)
	}
	js.WriteString("}")
	var page bytes.Buffer
	page.WriteString("\n<!DOCTYPE html>\n<html>\n<head></head>\n<body>\n<script type=\"module\">\n")
	page.WriteString("// a stand-in for the d3 plot of _memory_viz\n")
	page.WriteString("let alloc_data = ")
	page.Write(js.Bytes())
	page.WriteString("\n\nfunction draw(data) { document.body.append(String(data.actions.length)) }\ndraw(alloc_data)\n</script>\n</body>\n</html>\n")
	return page.Bytes()
}

// plotWriter interns strings and stack suffixes as trace_plot did.
type plotWriter struct {
	strs     []string
	strIdx   map[string]int
	suffixes [][2]int // [string, next suffix or −1]
	sufIdx   map[[2]int]int
	sizes    []int
	infos    []int
	actions  []int
	initial  []int
}

func (p *plotWriter) str(s string) int {
	if i, ok := p.strIdx[s]; ok {
		return i
	}
	p.strs = append(p.strs, s)
	p.strIdx[s] = len(p.strs) - 1
	return len(p.strs) - 1
}

func (p *plotWriter) suffix(sid, next int) int {
	k := [2]int{sid, next}
	if i, ok := p.sufIdx[k]; ok {
		return i
	}
	p.suffixes = append(p.suffixes, k)
	p.sufIdx[k] = len(p.suffixes) - 1
	return len(p.suffixes) - 1
}

// element adds an allocation whose info is lines (header first) and
// returns its index; the chain is built from the last line.
func (p *plotWriter) element(size int64, lines []string) int {
	next := -1
	for i := len(lines) - 1; i >= 0; i-- {
		next = p.suffix(p.str(lines[i]), next)
	}
	p.sizes = append(p.sizes, int(size))
	p.infos = append(p.infos, next)
	return len(p.sizes) - 1
}

func writeInts(b *bytes.Buffer, v []int) {
	b.WriteString("[")
	for i, x := range v {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(x))
	}
	b.WriteString("]")
}

// frameLines formats a frames list as "file:line:name", innermost first.
func frameLines(v any) []string {
	l, _ := v.(*List)
	var out []string
	for _, it := range listItems(l) {
		f := it.(*Dict)
		out = append(out, fmt.Sprintf("%v:%v:%v", get(f, "filename"), get(f, "line"), get(f, "name")))
	}
	return out
}

// pyFormatSize is _memory_viz's size format: one decimal, binary units.
func pyFormatSize(n int64) string {
	v := float64(n)
	for _, u := range []string{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"} {
		if math.Abs(v) < 1024 {
			return fmt.Sprintf("%3.1f%sB", v, u)
		}
		v /= 1024
	}
	return fmt.Sprintf("%.1fYiB", v)
}

// pyJSONString quotes s as Python's json.dumps does (ASCII only).
func pyJSONString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20 || r > 0x7e:
			if r > 0xffff {
				r -= 0x10000
				fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func get(d *Dict, key string) any {
	if d == nil {
		return nil
	}
	for i, k := range d.Keys {
		if k == key {
			return d.Vals[i]
		}
	}
	return nil
}

func listItems(l *List) []any {
	if l == nil {
		return nil
	}
	return l.Items
}

func toI64(v any) int64 {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int64:
		return x
	case uint64:
		return int64(x)
	}
	return 0
}

func toU64(v any) uint64 { return uint64(toI64(v)) }
