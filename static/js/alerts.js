// Live alerts: connect to /ws/alerts, show each event, reconnect with backoff when dropped.
(function () {
  const status = document.getElementById("ws-status");
  const feed = document.getElementById("alerts");
  if (!status || !feed) return;
  let delay = 500;
  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/ws/alerts`);
    socket.onopen = () => { delay = 500; status.textContent = "Live"; status.dataset.state = "open"; };
    socket.onmessage = (message) => {
      const event = JSON.parse(message.data);
      const item = document.createElement("li");
      item.textContent = `${event.at} ${event.event}${event.agent ? " · " + event.agent : ""}${event.message ? " · " + event.message : ""}`;
      feed.prepend(item);
    };
    socket.onclose = () => {
      status.textContent = "Disconnected; reconnecting…"; status.dataset.state = "closed";
      setTimeout(connect, delay); delay = Math.min(delay * 2, 10000);
    };
  }
  connect();
})();
