// The fleet page's charts, drawn from the page's own JSON (plotly served locally).
(function () {
  const data = document.getElementById("fleet-charts");
  if (!data || !window.Plotly) return;
  const charts = JSON.parse(data.textContent);
  for (const [name, id] of [["trend", "chart-fleet-trend"], ["silence", "chart-fleet-silence"], ["compliance", "chart-fleet-compliance"]]) {
    const node = document.getElementById(id);
    if (node && charts[name]) {
      Plotly.react(node, charts[name].data, charts[name].layout, { displayModeBar: false, responsive: true });
    }
  }
})();
