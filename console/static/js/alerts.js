// Live alerts: connect to /ws/alerts with the chosen subscription, show each event, pop a
// toast, refresh the counters; reconnect with backoff and catch up from the last id seen.
// The server draws the newest alerts with the page; catch-up re-sends a few alerts from before
// the last id (ids are taken at insert, so a late commit can carry a lower id), so every id is
// shown once, in id order, whatever way it arrived.
(function () {
  const status = document.getElementById("ws-status");
  const feed = document.getElementById("alerts");
  if (!status || !feed) return;
  const form = document.getElementById("subscription");
  const toasts = document.getElementById("toasts");
  const empty = document.getElementById("alerts-empty");
  const KEEP = 100;
  const RANK = { "": 0, low: 1, medium: 2, high: 3 };
  const saved = JSON.parse(sessionStorage.getItem("alerts-subscription") || "{}");
  const seen = new Set();
  const order = [];
  function remember(id) {
    seen.add(id);
    order.push(id);
    while (order.length > 5000) seen.delete(order.shift());
  }
  let lastId = Number(sessionStorage.getItem("alerts-last-id") || feed.dataset.lastId || 0);
  let delay = 500;
  let socket = null;

  function subscription() {
    return JSON.parse(sessionStorage.getItem("alerts-subscription") || "{}");
  }
  function wanted(item, choice) {
    // What the server's subscription filter keeps, for the items drawn with the page.
    if ((RANK[item.dataset.severity] || 0) < (RANK[choice.min_severity || ""] || 0)) return false;
    if (choice.scope === "agent") return item.dataset.agent === (choice.agent || "");
    if (choice.scope === "mine") return item.dataset.owner === feed.dataset.user;
    return true;
  }
  for (const item of feed.querySelectorAll("li[data-id]")) {
    remember(Number(item.dataset.id));
    if (!wanted(item, saved)) item.remove();
  }
  if (form) {
    for (const [name, value] of Object.entries(saved)) if (form.elements[name]) form.elements[name].value = value;
    form.addEventListener("change", () => {
      const choice = Object.fromEntries(new FormData(form).entries());
      sessionStorage.setItem("alerts-subscription", JSON.stringify(choice));
      for (const item of feed.querySelectorAll("li[data-id]")) if (!wanted(item, choice)) item.remove();
      if (socket) socket.close(4000, "resubscribe");
    });
  }
  function label(event) {
    if (event.line) return event.line; // the server's sentence (audit/sentences.py)
    const parts = [event.event];
    if (event.agent) parts.push(event.agent);
    if (event.severity) parts.push(`severity ${event.severity}`);
    if (event.kind) parts.push(`${event.kind} ${event.pointer || ""}`.trim());
    if (event.message) parts.push(event.message);
    return parts.join(" · ");
  }
  function place(item, position) {
    // Newest (highest id) first: a late alert with a lower id goes where it belongs.
    item.dataset.position = position;
    let before = null;
    for (const other of feed.children) {
      if (Number(other.dataset.position || other.dataset.id) < position) { before = other; break; }
    }
    feed.insertBefore(item, before);
    while (feed.children.length > KEEP) feed.lastElementChild.remove();
    if (empty) empty.hidden = true;
  }
  function show(event) {
    const item = document.createElement("li");
    item.dataset.event = event.event;
    if (event.id) item.dataset.id = event.id;
    item.dataset.agent = event.agent || "";
    item.dataset.severity = event.severity || "";
    item.dataset.owner = event.owner_id == null ? "" : String(event.owner_id);
    if (event.finding) item.dataset.finding = event.finding;
    if (event.incident) item.dataset.incident = event.incident;
    if (event.findings) item.dataset.findings = String(event.findings.length);
    // A later finding of the same incident replaces its line: one line per incident.
    if (event.replaces) for (const old of feed.querySelectorAll(`li[data-id="${event.replaces}"]`)) old.remove();
    if (event.event === "catchup.truncated") item.className = "gap";
    const time = document.createElement("time");
    if (event.at) {
      time.dateTime = event.at;
      time.title = `${event.at.slice(0, 10)} ${event.at.slice(11, 19)} UTC`;
    }
    time.textContent = event.at ? "just now" : "";
    item.append(time, document.createTextNode(" "));
    if (event.link) {
      const link = document.createElement("a");
      link.href = event.link;
      link.textContent = label(event);
      item.append(link);
    } else {
      item.append(document.createTextNode(label(event)));
    }
    // The gap notice sits just below the alerts replayed after it; anything without an id
    // is news.
    place(item, event.id || (event.before_id ? event.before_id - 0.5 : Infinity));
    if (toasts && !event.replayed) {
      // One toast per incident: a later finding or step (handed to an approver, corrected)
      // of the same cause updates the toast shown.
      const key = event.incident || "";
      const same = key ? [...toasts.children].find((t) => t.dataset.incident === key) : null;
      if (same) {
        same.textContent = label(event); // the line names how many findings it now holds
      } else {
        const toast = document.createElement("div");
        toast.className = `toast sev-${event.severity || "none"}`;
        toast.setAttribute("role", "status");
        toast.textContent = label(event);
        if (key) toast.dataset.incident = key;
        toasts.append(toast);
        setTimeout(() => toast.remove(), 6000);
      }
    }
    if (window.refreshDashboard) window.refreshDashboard();
  }
  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const query = new URLSearchParams(subscription());
    query.set("since", String(lastId));
    socket = new WebSocket(`${scheme}://${location.host}/ws/alerts?${query}`);
    socket.onopen = () => { delay = 500; status.textContent = "Live"; status.dataset.state = "open"; };
    socket.onmessage = (message) => {
      const event = JSON.parse(message.data);
      if (event.id) {
        if (seen.has(event.id)) return; // caught up and live, or re-read around a late commit
        remember(event.id);
        if (event.id > lastId) { lastId = event.id; sessionStorage.setItem("alerts-last-id", String(lastId)); }
      }
      show(event);
    };
    socket.onclose = (closed) => {
      status.textContent = "Disconnected; reconnecting…"; status.dataset.state = "closed";
      const wait = closed.code === 4000 ? 0 : delay;
      setTimeout(connect, wait); delay = Math.min(delay * 2, 10000);
    };
  }
  connect();
})();
