package pickle

// Containers reduced into the model are reused for the next ones, unless the
// memo or DUP shared them (gets > 0) with something that may still use
// them: a long trace then decodes with a few thousand allocations instead
// of millions.

// newDict returns an empty dict, reusing one already reduced into the model.
func (m *vm) newDict() *pdict {
	if n := len(m.freeDicts); n > 0 {
		d := m.freeDicts[n-1]
		m.freeDicts = m.freeDicts[:n-1]
		return d
	}
	return &pdict{}
}

// recycle keeps a dict consumed into the model for reuse.
func (m *vm) recycle(d *pdict) {
	if len(m.freeDicts) < 4096 && d.gets == 0 {
		clear(d.keys)
		clear(d.vals)
		*d = pdict{keys: d.keys[:0], vals: d.vals[:0]}
		m.freeDicts = append(m.freeDicts, d)
	}
}

// newList returns an empty list, reusing a frames list already interned.
func (m *vm) newList() *plist {
	if n := len(m.freeLists); n > 0 {
		l := m.freeLists[n-1]
		m.freeLists = m.freeLists[:n-1]
		return l
	}
	return &plist{}
}

// reuseList keeps a frames list whose stack was interned, and to which
// nothing refers any more (see schema.stackOf), for reuse.
func (m *vm) reuseList(l *plist) {
	if len(m.freeLists) < 4096 && len(l.items)+l.nEvents+len(l.blocks)+len(l.segs)+len(l.annots) == 0 {
		l.frames, l.memo, l.stack, l.gets, l.entryRefs = l.frames[:0], 0, 0, 0, 0
		m.freeLists = append(m.freeLists, l)
	}
}
