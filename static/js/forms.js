// Forms that htmx posts and that should empty once their answer has been swapped in,
// e.g. the agent chat: <form data-reset-after-swap-into="chat-log">. A listener here
// rather than hx-on, because hx-on is evaluated code, which the CSP (script-src 'self') refuses.
// A failed post keeps what was typed; without JavaScript the server re-renders the page.
document.addEventListener("htmx:afterRequest", (event) => {
  const form = event.detail.elt;
  if (!(form instanceof HTMLFormElement) || !form.dataset.resetAfterSwapInto) return;
  const target = event.detail.target;
  if (event.detail.successful && target && target.id === form.dataset.resetAfterSwapInto) {
    form.reset();
  }
});
