// Copy buttons. The dashboard works without this file: the values are in selectable fields.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const field = document.getElementById(button.dataset.copy);
  if (!field) return;
  try {
    await navigator.clipboard.writeText(field.value);
    button.textContent = "Copied";
  } catch {
    field.select();
    button.textContent = "Press Ctrl+C";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 2000);
});

// A chosen CSV file fills the payout form's text (the form also takes the text pasted).
document.addEventListener("change", async (event) => {
  const input = event.target.closest("input[type=file][data-fills]");
  if (!input || !input.files || !input.files[0]) return;
  const field = document.getElementById(input.dataset.fills);
  if (field) field.value = await input.files[0].text();
});

// A page that follows changes (`data-refresh`, seconds) reloads itself, but never under a
// person deciding: while a field or button of one of its forms has the focus, or a field
// holds something typed, it waits (and counts the waits in `data-refresh-held`).
(() => {
  const root = document.querySelector("[data-refresh]");
  if (!root) return;
  let waited = 0;
  setInterval(() => {
    waited += 1;
    if (waited < Number(root.dataset.refresh)) return;
    const active = document.activeElement;
    const fields = document.querySelectorAll("form input:not([type=hidden]), form textarea");
    if ((active && active.closest("form")) || [...fields].some((f) => f.value)) {
      root.dataset.refreshHeld = String(Number(root.dataset.refreshHeld || 0) + 1);
      return;
    }
    location.reload();
  }, 1000);
})();
