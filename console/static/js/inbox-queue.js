// The inbox queue's "time left" column, kept current while the page is open: each line counts
// down to its deadline and turns "overdue" when it passes (the server sorted them already).
(function () {
  const cells = document.querySelectorAll(".inbox-queue [data-deadline]");
  if (!cells.length) return;
  function text(seconds) {
    const late = seconds < 0;
    let rest = Math.abs(seconds);
    const days = Math.floor(rest / 86400); rest %= 86400;
    const hours = Math.floor(rest / 3600); rest %= 3600;
    const minutes = Math.floor(rest / 60);
    const parts = [];
    if (days) parts.push(`${days} d`);
    if (hours) parts.push(`${hours} h`);
    if (!days) parts.push(minutes || hours ? `${minutes} min` : `${rest % 60} s`);
    const said = parts.slice(0, 2).join(" ");
    return late ? `overdue ${said}` : `${said} left`;
  }
  function tick() {
    const now = Date.now();
    for (const cell of cells) {
      const seconds = Math.trunc((Date.parse(cell.dataset.deadline) - now) / 1000);
      cell.textContent = text(seconds);
      cell.classList.toggle("overdue", seconds < 0);
    }
  }
  setInterval(tick, 1000);
})();
