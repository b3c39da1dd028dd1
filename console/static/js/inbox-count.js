// The approver's inbox count in the navigation (and on the inbox page, its figures), kept
// live: any alert about proposals, escalations or decisions refetches the counts. On the inbox
// page a changed total offers to show the current queue rather than moving rows under the
// reader's hands.
(function () {
  const badge = document.getElementById("inbox-count");
  if (!badge || !window.WebSocket) return;
  const summary = document.getElementById("inbox-summary");
  const stale = document.getElementById("inbox-stale");
  const kinds = /^(proposal|escalation|decision)\./;
  let delay = 1000;
  function refresh() {
    fetch("/api/v1/inbox", { credentials: "same-origin" })
      .then((r) => (r.ok ? r.json() : null))
      .then((counts) => {
        if (!counts) return;
        badge.textContent = counts.total;
        badge.hidden = counts.total === 0;
        for (const node of document.querySelectorAll("[data-inbox-count]")) {
          const value = counts[node.dataset.inboxCount];
          if (value !== undefined) node.textContent = value;
        }
        if (summary && stale) stale.hidden = String(counts.total) === summary.dataset.total;
      }).catch(() => {});
  }
  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/ws/alerts`);
    socket.onopen = () => { delay = 1000; };
    socket.onmessage = (message) => { if (kinds.test(JSON.parse(message.data).event)) refresh(); };
    socket.onclose = () => { setTimeout(connect, delay); delay = Math.min(delay * 2, 30000); };
  }
  connect();
})();
