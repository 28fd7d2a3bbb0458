package report

import (
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// timelineLabels are the boxes, in pixels, of the names drawn on the
// shown device's timeline: phase names, step labels ("step 3") and the
// OOM's mark.
const timelineLabels = `(() => {
  const el = document.querySelector('section.device:not([hidden]) [data-chart="timeline"]');
  const c = el && echarts.getInstanceByDom(el);
  if (!c) return [];
  const names = new Set(['forward', 'backward', 'optimizer', 'zero_grad', 'data', 'unknown', 'OOM']);
  const out = [];
  c.getZr().storage.getDisplayList(true).forEach(e => {
    const text = e.style && e.style.text;
    if (!text || !(names.has(text) || /^step \d+$/.test(text)) || e.invisible || e.ignore) return;
    const r = e.getBoundingRect().clone();
    r.applyTransform(e.getComputedTransform());
    out.push({text: text, x: r.x, y: r.y, w: r.width, h: r.height});
  });
  return out;
})()`

// TestHTMLStepLabels: the step labels on every real file's timelines never
// overprint each other, a phase name or the OOM's mark, at any width of
// the window from 1400 to 400 px (at 600 px, steps of a few pixels apart
// drew their labels over each other), and the widest window still labels
// some steps.
func TestHTMLStepLabels(t *testing.T) {
	bctx := newBrowser(t)
	files := append([]string{demoPath}, st.SharedInputs(t)...)
	steps := 0
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			page, r := writeReport(t, f)
			tab := openTab(t, bctx, page)
			for i := range r.Devices {
				showDevice(t, tab, i)
				for _, w := range []int64{1400, 1000, 800, 600, 400} {
					if err := chromedp.Do(tab, chromedp.EmulateViewport(w, 1000)); err != nil {
						t.Fatal(err)
					}
					eval[bool](t, tab, `(window.dispatchEvent(new Event('resize')), true)`)
					boxes := eval[[]labelBox](t, tab, timelineLabels)
					for _, b := range boxes {
						if w == 1400 && len(b.Text) > 5 && b.Text[:5] == "step " {
							steps++
						}
					}
					for _, o := range overlaps(boxes) {
						t.Errorf("device %d, %d px: labels %s overlap", r.Devices[i].Device, w, o)
					}
				}
			}
		})
	}
	if steps == 0 {
		t.Error("no step label drawn on any page at 1400 px: the test sees nothing")
	}
	t.Logf("%d step labels drawn at 1400 px", steps)
}
