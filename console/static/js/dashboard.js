// The overview's charts and counters: drawn from the page, refreshed from /api/v1/dashboard
// when an alert arrives (at most every two seconds).
(function () {
  const ids = { drift: "chart-drift", response: "chart-response", escalations: "chart-escalations" };
  function draw(charts) {
    if (!window.Plotly) return;
    for (const [name, id] of Object.entries(ids)) {
      const node = document.getElementById(id);
      if (node && charts[name]) {
        Plotly.react(node, charts[name].data, charts[name].layout, { displayModeBar: false, responsive: true });
      }
    }
  }
  function update(summary) {
    for (const [health, count] of Object.entries(summary.health)) {
      const node = document.querySelector(`[data-health="${health}"]`);
      if (node) node.textContent = count;
    }
    const post = document.getElementById("post-convergence");
    if (post) post.textContent = summary.post_convergence_drift;
    draw(summary.charts);
    const counters = document.getElementById("counters");
    if (counters) counters.dataset.refreshed = summary.at;
  }
  const initial = document.getElementById("charts-data");
  if (initial) draw(JSON.parse(initial.textContent));
  let pending = null;
  window.refreshDashboard = function () {
    if (pending) return;
    pending = setTimeout(() => {
      pending = null;
      fetch("/api/v1/dashboard", { credentials: "same-origin" })
        .then((r) => (r.ok ? r.json() : null)).then((s) => s && update(s)).catch(() => {});
    }, 2000);
  };
})();
