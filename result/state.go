package result

// SegmentState is one reserved range of the allocator at an event, with its
// blocks in address order: what MemoryViz's Allocator State History shows.
type SegmentState struct {
	Address    uint64       `json:"address"`
	Size       int64        `json:"size"`
	Expandable bool         `json:"expandable"`
	Blocks     []BlockState `json:"blocks"`
}

// BlockState is a piece of a segment at an event: a live block (Block is
// its index in History.Blocks) or cached free memory (Block −1).
type BlockState struct {
	Address uint64 `json:"address"`
	Size    int64  `json:"size"`
	Block   int    `json:"-"`
}

// Free reports whether the piece is cached free memory.
func (b BlockState) Free() bool { return b.Block < 0 }
