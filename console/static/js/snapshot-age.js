// Pages that show the fleet snapshot (the fleet view, the toxic paths): while the workers
// compute a newer one, ask the page again every few seconds; once its "as of" moves, reload,
// unless the reader has typed into a form here (then say a newer view is ready instead).
(function () {
  const age = document.querySelector(".snapshot-age");
  if (!age || age.dataset.refreshing !== "true") return;
  let typed = false;
  document.addEventListener("input", () => { typed = true; });
  let tries = 0;
  const timer = setInterval(async () => {
    if (++tries > 60) { clearInterval(timer); return; }
    let response;
    try {
      response = await fetch(location.href, { headers: { Accept: "text/html" }, credentials: "same-origin" });
    } catch (error) {
      return; // offline for a moment: ask again next time
    }
    if (!response.ok) return;
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = page.querySelector(".snapshot-age");
    if (!fresh || fresh.dataset.asOf === age.dataset.asOf) return;
    clearInterval(timer);
    if (!typed && !document.querySelector(".errorlist")) { // never re-send a refused form
      location.reload();
      return;
    }
    age.textContent = "A newer view is ready: reload the page to see it.";
  }, 3000);
})();
