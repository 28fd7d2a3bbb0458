package snapshot

import (
	"cmp"
	"slices"
	"unsafe"
)

// Builder fills a Snapshot while a reader decodes, interning frames, stacks
// and strings so that repeated ones are stored once.
type Builder struct {
	Snap      *Snapshot
	frameIdx  map[Frame]FrameID
	stackIdx  map[string]StackID
	strIdx    map[string]uint32
	threadIdx map[[2]string]uint16
	devIdx    map[int]*Device
	streamIdx map[uint64]uint16
}

// NewBuilder starts an empty Snapshot for the given source.
func NewBuilder(src Source) *Builder {
	b := &Builder{
		Snap:      &Snapshot{Source: src, Stacks: [][]FrameID{nil}, Strings: []string{""}, Threads: []Thread{{}}, Streams: []uint64{0}},
		frameIdx:  make(map[Frame]FrameID),
		stackIdx:  map[string]StackID{"": 0},
		strIdx:    map[string]uint32{"": 0},
		threadIdx: map[[2]string]uint16{{"", ""}: 0},
		devIdx:    map[int]*Device{},
		streamIdx: map[uint64]uint16{0: 0},
	}
	return b
}

// Frame interns a frame and returns its ID. A function or file name
// longer than maxNameBytes is cut (cutName, cutPath).
func (b *Builder) Frame(f Frame) FrameID {
	if len(f.Name) > MaxNameBytes || len(f.Filename) > MaxNameBytes {
		f.Name, f.Filename = CutName(f.Name), cutPath(f.Filename)
	}
	if id, ok := b.frameIdx[f]; ok {
		return id
	}
	id := FrameID(len(b.Snap.Frames))
	b.Snap.Frames = append(b.Snap.Frames, f)
	b.frameIdx[f] = id
	return id
}

// Stack interns a stack (innermost frame first) and returns its ID; the
// empty stack is 0. The slice is copied.
func (b *Builder) Stack(frames []FrameID) StackID {
	if len(frames) == 0 {
		return 0
	}
	// The key is the frame IDs' own bytes (host order: it never leaves
	// memory); looking it up copies nothing.
	key := unsafe.Slice((*byte)(unsafe.Pointer(&frames[0])), len(frames)*int(unsafe.Sizeof(frames[0])))
	if id, ok := b.stackIdx[string(key)]; ok {
		return id
	}
	id := StackID(len(b.Snap.Stacks))
	b.Snap.Stacks = append(b.Snap.Stacks, append([]FrameID(nil), frames...))
	b.stackIdx[string(key)] = id
	return id
}

// String interns a metadata string and returns its index in
// Snapshot.Strings; one longer than maxNameBytes is cut (cutName).
func (b *Builder) String(s string) uint32 {
	s = CutName(s)
	if id, ok := b.strIdx[s]; ok {
		return id
	}
	id := uint32(len(b.Snap.Strings))
	b.Snap.Strings = append(b.Snap.Strings, s)
	b.strIdx[s] = id
	return id
}

// Thread interns a thread by pid and tid and returns its index.
func (b *Builder) Thread(pid, tid string) uint16 {
	k := [2]string{pid, tid}
	if id, ok := b.threadIdx[k]; ok {
		return id
	}
	if len(b.Snap.Threads) >= 1<<16-1 {
		return 0
	}
	id := uint16(len(b.Snap.Threads))
	b.Snap.Threads = append(b.Snap.Threads, Thread{PID: pid, TID: tid})
	b.threadIdx[k] = id
	return id
}

// Device returns the device with this ID, creating it if needed; devices
// stay sorted by ID. Readers cap how many a file may create.
func (b *Builder) Device(id int, kind DeviceKind) *Device {
	if d := b.devIdx[id]; d != nil {
		return d
	}
	d := &Device{ID: id, Kind: kind, Baseline: -1}
	b.devIdx[id] = d
	i, _ := slices.BinarySearchFunc(b.Snap.Devices, id, func(x *Device, id int) int { return cmp.Compare(x.ID, id) })
	b.Snap.Devices = slices.Insert(b.Snap.Devices, i, d)
	return d
}

// Stream interns a raw stream handle and returns its index (0 is stream 0;
// past 65,535 distinct streams the rest share the last index).
func (b *Builder) Stream(h uint64) uint16 {
	if i, ok := b.streamIdx[h]; ok {
		return i
	}
	if len(b.Snap.Streams) >= 1<<16-1 {
		return uint16(len(b.Snap.Streams) - 1)
	}
	i := uint16(len(b.Snap.Streams))
	b.Snap.Streams = append(b.Snap.Streams, h)
	b.streamIdx[h] = i
	return i
}
