package analysis

import (
	"sort"

	"github.com/torchmem/torchmem/result"
)

// blockSite names the allocation site of a block: its first user frame, or
// "<allocated before recording: CATEGORY>" / "<no frames: PHASE>".
func (h *History) blockSite(c *siteCache, b *Block) string { return h.blockSiteRef(c, b).name }

// blockSiteRef is blockSite with the file and line of the frame naming it.
func (h *History) blockSiteRef(c *siteCache, b *Block) siteRef {
	if b.Untracked {
		return siteRef{name: result.SiteUntracked, line: -1}
	}
	if s := c.get(b.Stack); s.name != "" {
		return s
	}
	// Without frames, name what is known: before recording, by category;
	// else by the phase that allocated it.
	if b.Alloc < 0 {
		return siteRef{name: result.SiteBeforeRecording[:len(result.SiteBeforeRecording)-1] + ": " + b.Category.String() + ">", line: -1}
	}
	return siteRef{name: result.SiteNoFrames[:len(result.SiteNoFrames)-1] + ": " + string(h.Phases.At(b.Alloc)) + ">", line: -1}
}

// TopSites groups the bytes live after event i by allocation site (the
// first user frame, "file.py:LINE function") and returns the n largest,
// each with its dominant category.
func (h *History) TopSites(i, n int) []result.Site {
	return h.topSites(h.newSiteCache(), i, n)
}

func (h *History) topSites(c *siteCache, i, n int) []result.Site {
	type acc struct {
		ref   siteRef
		bytes int64
		count int
		cats  result.Categories
	}
	m := map[string]*acc{}
	for _, b := range h.LiveBlocks(i) {
		ref := h.blockSiteRef(c, b)
		a := m[ref.name]
		if a == nil {
			a = &acc{ref: ref}
			m[ref.name] = a
		}
		a.bytes += b.Size
		a.count++
		a.cats[b.Category] += b.Size
	}
	out := make([]result.Site, 0, len(m))
	for site, a := range m {
		st := result.Site{Site: site, Bytes: a.bytes, Count: a.count, Category: dominantCategory(a.cats), File: a.ref.file}
		if a.ref.file != "" && a.ref.line > 0 {
			st.Line = a.ref.line
		}
		out = append(out, st)
	}
	sort.Slice(out, func(x, y int) bool {
		if out[x].Bytes != out[y].Bytes {
			return out[x].Bytes > out[y].Bytes
		}
		return out[x].Site < out[y].Site
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// dominantCategory returns the category with the most bytes of c.
func dominantCategory(c result.Categories) result.Category {
	best := result.Unknown
	var bv int64 = -1
	for i, v := range c {
		if v > bv {
			best, bv = result.Category(i), v
		}
	}
	return best
}
