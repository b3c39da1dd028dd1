// Each segment of the compliance timeline is as wide as its share of the span. Set through
// the DOM, not a style attribute, so the page passes a Content-Security-Policy without
// 'unsafe-inline'.
document.querySelectorAll(".timeline .seg[data-share]").forEach((segment) => {
  segment.style.flexGrow = segment.dataset.share;
});
// The same timeline as a plotly chart on a time axis, hover for each interval's reason.
(function () {
  const node = document.getElementById("timeline-chart");
  const data = document.getElementById("timeline-chart-data");
  if (!node || !data || !window.Plotly) return;
  const chart = JSON.parse(data.textContent);
  Plotly.react(node, chart.data, chart.layout, { displayModeBar: false, responsive: true })
    .then(() => { node.dataset.drawn = "true"; });
})();
