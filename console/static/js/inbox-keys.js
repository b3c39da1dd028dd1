// Inbox keyboard shortcuts, as GitHub's and PagerDuty's lists have them: j / k move the
// selection, e opens the selected item in place, a opens it at its decision and puts the
// focus on its approve button (nothing is sent until that button is pressed, so four eyes and
// step-up are the server's as for a click), ? shows the list. Keys typed into a field are
// left alone.
(function () {
  const rows = [...document.querySelectorAll("tr.inbox-item")];
  const help = document.getElementById("inbox-keys");
  if (!rows.length && !help) return;
  let current = -1;

  function typing(target) {
    return target.closest("input, textarea, select, [contenteditable='true']") !== null;
  }

  function select(index) {
    if (!rows.length) return;
    current = Math.max(0, Math.min(rows.length - 1, index));
    rows.forEach((row, i) => {
      row.classList.toggle("selected", i === current);
      row.setAttribute("aria-selected", i === current ? "true" : "false");
    });
    const summary = rows[current].querySelector("summary");
    (summary || rows[current]).focus();
    rows[current].scrollIntoView({block: "nearest"});
  }

  function opened() {
    if (current < 0) select(0);
    const details = rows[current] && rows[current].querySelector("details");
    if (details) details.open = true;
    return rows[current];
  }

  function approve() {
    const row = opened();
    if (!row) return;
    // The item's first decision form: a resolve form, or a proposal card's approve form.
    const form = row.querySelector("form.resolve, .decide form");
    if (!form) {  // a reminder (recertify): its link is the way in
      const link = row.querySelector(".what details a");
      if (link) link.focus();
      return;
    }
    const comment = form.querySelector("input[name=comment][required]");
    if (comment && !comment.value.trim()) {
      comment.focus();  // the comment comes first, then the buttons (Tab)
      return;
    }
    const button = form.querySelector("button[type=submit]:not(.danger)") ||
      form.querySelector("button[type=submit]");  // a retirement's approval is its red button
    if (button) button.focus();
  }

  function toggleHelp() {
    if (!help) return;
    if (help.open) help.close(); else help.showModal();
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    if (help && help.open && event.key !== "?") return;  // the dialog has the keyboard
    const actions = {j: () => select(current + 1), k: () => select(current - 1),
                     e: () => { const row = opened(); if (row) row.querySelector("summary")?.focus(); },
                     a: approve, "?": toggleHelp};
    const action = actions[event.key];
    if (!action) return;
    event.preventDefault();
    action();
  });
  if (help) {
    help.querySelector("button.close")?.addEventListener("click", () => help.close());
  }
})();
