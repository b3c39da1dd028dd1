// Move keyboard and screen-reader focus to a form's error summary, so the errors are read first.
(function () {
  const summary = document.getElementById("error-summary");
  if (summary) summary.focus();
})();
