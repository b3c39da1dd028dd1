// An agent's page, live: listen on /ws/alerts for alerts about this agent; on each one show its
// sentence and redraw the header (health, sync, last verified, open findings) from
// /agents/<name>/status, so "corrected" appears without a reload. Reconnects with backoff.
(function () {
  const summary = document.getElementById("agent-summary");
  const feed = document.getElementById("agent-live");
  const state = document.getElementById("agent-live-state");
  if (!summary || !feed || !state || !window.WebSocket) return;
  const agent = summary.dataset.agent;
  let lastId = 0;
  let delay = 500;
  let pending = null;

  function refresh() {
    // Alerts come in bursts (detected, corrected, ...): redraw once per burst.
    if (pending) return;
    pending = setTimeout(() => {
      pending = null;
      fetch(summary.dataset.statusUrl, { credentials: "same-origin" })
        .then((r) => (r.ok ? r.text() : null))
        .then((html) => {
          if (html === null) return;
          summary.innerHTML = html;
          summary.dataset.refreshed = String(lastId);
        })
        .catch(() => {});
    }, 300);
  }
  function show(event) {
    const item = document.createElement("li");
    item.dataset.event = event.event;
    if (event.severity) item.className = `sev-${event.severity}`;
    const time = document.createElement("time");
    if (event.at) {
      time.dateTime = event.at;
      time.title = `${event.at.slice(0, 10)} ${event.at.slice(11, 19)} UTC`;
      time.textContent = "just now";
    }
    item.append(time, document.createTextNode(" " + (event.line || event.event)));
    feed.prepend(item);
    while (feed.children.length > 20) feed.lastElementChild.remove();
  }
  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const query = new URLSearchParams({ scope: "agent", agent: agent });
    if (lastId) query.set("since", String(lastId));
    const socket = new WebSocket(`${scheme}://${location.host}/ws/alerts?${query}`);
    socket.onopen = () => {
      delay = 500;
      state.textContent = "Live: this page updates as the reconciler works.";
      state.dataset.state = "open";
      if (lastId) refresh(); // whatever changed while disconnected
    };
    socket.onmessage = (message) => {
      const event = JSON.parse(message.data);
      if (event.agent !== agent) return;
      if (event.id) {
        if (event.id <= lastId) return;
        lastId = event.id;
      }
      show(event);
      refresh();
    };
    socket.onclose = () => {
      state.textContent = "Disconnected; reconnecting…";
      state.dataset.state = "closed";
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    };
  }
  connect();
})();
