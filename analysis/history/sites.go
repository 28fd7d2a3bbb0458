package history

import (
	"sort"

	"github.com/torchmem/torchmem/result"
)

// BlockSite names the allocation site of a block: its first user frame, or
// "<allocated before recording: CATEGORY>" / "<no frames: PHASE>".
func (h *History) BlockSite(c *SiteCache, b *Block) string { return h.blockSiteRef(c, b).Name }

// blockSiteRef is blockSite with the file and line of the frame naming it.
func (h *History) blockSiteRef(c *SiteCache, b *Block) siteRef {
	if b.Untracked {
		return siteRef{Name: result.SiteUntracked, Line: -1}
	}
	if s := c.Get(b.Stack); s.Name != "" {
		return s
	}
	// Without frames, name what is known: before recording, by category;
	// else by the phase that allocated it.
	if b.Alloc < 0 {
		return siteRef{Name: result.SiteBeforeRecording[:len(result.SiteBeforeRecording)-1] + ": " + b.Category.String() + ">", Line: -1}
	}
	return siteRef{Name: result.SiteNoFrames[:len(result.SiteNoFrames)-1] + ": " + string(h.Phases.At(int(b.Alloc))) + ">", Line: -1}
}

// TopSites groups the bytes live after event i by allocation site (the
// first user frame, "file.py:LINE function") and returns the n largest,
// each with its dominant category.
func (h *History) TopSites(i, n int) []result.Site {
	return h.TopSitesIn(h.NewSiteCache(), i, n)
}

// TopSitesIn is TopSites with the sites found through c, shared with the
// other passes over the same device.
func (h *History) TopSitesIn(c *SiteCache, i, n int) []result.Site {
	type acc struct {
		ref   siteRef
		bytes int64
		count int
		cats  result.Categories
	}
	m := map[string]*acc{}
	for _, b := range h.LiveBlocks(i) {
		ref := h.blockSiteRef(c, b)
		a := m[ref.Name]
		if a == nil {
			a = &acc{ref: ref}
			m[ref.Name] = a
		}
		a.bytes += b.Size
		a.count++
		a.cats[b.Category] += b.Size
	}
	out := make([]result.Site, 0, len(m))
	for site, a := range m {
		st := result.Site{Site: site, Bytes: a.bytes, Count: a.count, Category: dominantCategory(a.cats), File: a.ref.File}
		if a.ref.File != "" && a.ref.Line > 0 {
			st.Line = a.ref.Line
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
