// Live alerts: connect to /ws/alerts with the chosen subscription, show each event, pop a
// toast, refresh the counters; reconnect with backoff and catch up from the last id seen.
(function () {
  const status = document.getElementById("ws-status");
  const feed = document.getElementById("alerts");
  if (!status || !feed) return;
  const form = document.getElementById("subscription");
  const toasts = document.getElementById("toasts");
  const saved = JSON.parse(sessionStorage.getItem("alerts-subscription") || "{}");
  let lastId = sessionStorage.getItem("alerts-last-id") || "";
  let delay = 500;
  let socket = null;
  if (form) {
    for (const [name, value] of Object.entries(saved)) if (form.elements[name]) form.elements[name].value = value;
    form.addEventListener("change", () => {
      const choice = Object.fromEntries(new FormData(form).entries());
      sessionStorage.setItem("alerts-subscription", JSON.stringify(choice));
      if (socket) socket.close(4000, "resubscribe");
    });
  }
  function label(event) {
    const parts = [event.event];
    if (event.agent) parts.push(event.agent);
    if (event.severity) parts.push(`severity ${event.severity}`);
    if (event.kind) parts.push(`${event.kind} ${event.pointer || ""}`.trim());
    if (event.message) parts.push(event.message);
    return parts.join(" · ");
  }
  function show(event) {
    const item = document.createElement("li");
    item.dataset.event = event.event;
    if (event.finding) item.dataset.finding = event.finding;
    const time = document.createElement("time");
    time.textContent = (event.at || "").slice(11, 19) + " ";
    item.append(time);
    if (event.link) {
      const link = document.createElement("a");
      link.href = event.link;
      link.textContent = label(event);
      item.append(link);
    } else {
      item.append(document.createTextNode(label(event)));
    }
    feed.prepend(item);
    while (feed.children.length > 100) feed.lastChild.remove();
    if (toasts && !event.replayed) {
      const toast = document.createElement("div");
      toast.className = `toast sev-${event.severity || "none"}`;
      toast.setAttribute("role", "status");
      toast.textContent = label(event);
      toasts.append(toast);
      setTimeout(() => toast.remove(), 6000);
    }
    if (window.refreshDashboard) window.refreshDashboard();
  }
  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const query = new URLSearchParams(JSON.parse(sessionStorage.getItem("alerts-subscription") || "{}"));
    if (lastId) query.set("since", lastId);
    socket = new WebSocket(`${scheme}://${location.host}/ws/alerts?${query}`);
    socket.onopen = () => { delay = 500; status.textContent = "Live"; status.dataset.state = "open"; };
    socket.onmessage = (message) => {
      const event = JSON.parse(message.data);
      if (event.id) { lastId = String(event.id); sessionStorage.setItem("alerts-last-id", lastId); }
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
