// The console bar folds its controls into Menu when they do not fit, as
// measured, not below a fixed width: what the bar holds differs by device
// (a touch device's Keyboard button, the other consoles offered, sound,
// files, the picture choice), so a tablet in portrait folds when its bar
// would scroll sideways and a wide one never does. The bar is measured
// unfolded on every change of the window's size or of what it shows;
// before folding it goes compact (body[data-compact]: words beside a glyph
// go).

// STATUS_PX is the room the status keeps before the controls fold: its
// whole text ("Connected"), or this much of a longer one (the ended card
// has all of it).
const STATUS_PX = 160;

// attachFold keeps body[data-fold] true while the bar's controls do not
// fit even compact; changed(folded) is told each time that changes.
export function attachFold(bar, status, changed) {
  const over = () => bar.scrollWidth > bar.clientWidth + 1
    || status.clientWidth + 1 < Math.min(status.scrollWidth, STATUS_PX);
  const measure = () => {
    const body = document.body;
    const was = body.dataset.fold === 'true';
    delete body.dataset.fold;
    delete body.dataset.compact;
    // First the bar drops the words its glyphs can do without (the Typing
    // toggle's "desktop"/"page"), then it folds.
    if (over()) body.dataset.compact = 'true';
    if (over()) body.dataset.fold = 'true';
    if (was !== (body.dataset.fold === 'true')) changed(!was);
  };
  let queued = false;
  const queue = () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      measure();
    });
  };
  window.addEventListener('resize', queue);
  new MutationObserver(queue).observe(bar, { subtree: true, childList: true, attributes: true, attributeFilter: ['hidden'] });
  measure();
}
