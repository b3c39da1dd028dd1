// Each segment of the compliance timeline is as wide as its share of the span. Set through
// the DOM, not a style attribute, so the page passes a Content-Security-Policy without
// 'unsafe-inline'.
document.querySelectorAll(".timeline .seg[data-share]").forEach((segment) => {
  segment.style.flexGrow = segment.dataset.share;
});
