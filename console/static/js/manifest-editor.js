// The apply page's YAML editor: a line-number gutter beside the textarea, and error links that
// put the cursor on the line they name. Without this script the form works the same, unnumbered.
(function () {
  const area = document.getElementById("manifest");
  const gutter = document.getElementById("manifest-gutter");
  if (!area) return;
  let errorLines = new Set((area.dataset.errorLines || "").split(" ").filter(Boolean).map(Number));

  function draw() {
    if (!gutter) return;
    const count = area.value.split("\n").length;
    const numbers = [];
    for (let n = 1; n <= count; n++) numbers.push(errorLines.has(n) ? `✖ ${n}` : String(n));
    gutter.textContent = numbers.join("\n") + "\n";
    gutter.scrollTop = area.scrollTop;
  }

  function goToLine(line) {
    const lines = area.value.split("\n");
    const n = Math.max(1, Math.min(line, lines.length));
    let start = 0;
    for (let i = 0; i < n - 1; i++) start += lines[i].length + 1;
    area.focus();
    area.setSelectionRange(start, start + lines[n - 1].length);
    const lineHeight = parseFloat(getComputedStyle(area).lineHeight) || 20;
    area.scrollTop = Math.max(0, (n - 3) * lineHeight);
    draw();
  }

  if (gutter) {
    gutter.hidden = false;
    area.parentElement.classList.add("numbered");
    area.addEventListener("input", () => {
      errorLines = new Set(); // the marks were for the text as sent; editing moves lines
      draw();
    });
    area.addEventListener("scroll", () => { gutter.scrollTop = area.scrollTop; });
    draw();
  }
  document.querySelectorAll("a[data-line]").forEach((link) => {
    link.addEventListener("click", (event) => {
      event.preventDefault();
      goToLine(parseInt(link.dataset.line, 10));
    });
  });
})();
