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
