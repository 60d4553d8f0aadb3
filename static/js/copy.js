// "Copy" buttons: <button data-copy-target="#field-id">. One delegated listener, so buttons
// that htmx swaps in later work too. Without JavaScript the field is still there to select.
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-copy-target]");
  if (!button) return;
  const field = document.querySelector(button.dataset.copyTarget);
  if (!field) return;
  field.select();
  const copied = navigator.clipboard
    ? navigator.clipboard.writeText(field.value)
    : Promise.resolve(document.execCommand("copy"));
  copied.then(
    () => { button.textContent = "Copied"; },
    () => { button.textContent = "Select and copy"; },
  );
});
