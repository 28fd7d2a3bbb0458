package analysis

import "sort"

// blockSite names the allocation site of a block: its first user frame, or
// "<allocated before recording: CATEGORY>" / "<no frames: PHASE>".
func (h *History) blockSite(c *siteCache, b *Block) string {
	if b.Untracked {
		return SiteUntracked
	}
	if s := c.get(b.Stack); s != "" {
		return s
	}
	// Without frames, name what is known: before recording, by category;
	// else by the phase that allocated it.
	if b.Alloc < 0 {
		return SiteBeforeRecording[:len(SiteBeforeRecording)-1] + ": " + b.Category.String() + ">"
	}
	return SiteNoFrames[:len(SiteNoFrames)-1] + ": " + string(h.Phases.At(b.Alloc)) + ">"
}

// TopSites groups the bytes live after event i by allocation site (the
// first user frame, "file.py:LINE function") and returns the n largest,
// each with its dominant category.
func (h *History) TopSites(i, n int) []Site {
	return h.topSites(newSiteCache(h.Snap), i, n)
}

func (h *History) topSites(c *siteCache, i, n int) []Site {
	type acc struct {
		bytes int64
		count int
		cats  Categories
	}
	m := map[string]*acc{}
	for _, b := range h.LiveBlocks(i) {
		site := h.blockSite(c, b)
		a := m[site]
		if a == nil {
			a = &acc{}
			m[site] = a
		}
		a.bytes += b.Size
		a.count++
		a.cats[b.Category] += b.Size
	}
	out := make([]Site, 0, len(m))
	for site, a := range m {
		out = append(out, Site{Site: site, Bytes: a.bytes, Count: a.count, Category: a.cats.dominant()})
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

// dominant returns the category with the most bytes.
func (c Categories) dominant() Category {
	best := Unknown
	var bv int64 = -1
	for i, v := range c {
		if v > bv {
			best, bv = Category(i), v
		}
	}
	return best
}
