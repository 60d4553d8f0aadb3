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

// The server answers 503 with a plain-text message when its database or task queue
// was unreachable for a moment (config/unavailable.py). htmx swaps nothing for an
// error, so say it where the page's messages appear; what was typed stays in the form.
document.addEventListener("htmx:responseError", (event) => {
  const xhr = event.detail.xhr;
  const messages = document.getElementById("messages");
  if (!xhr || xhr.status !== 503 || !messages) return;
  const message = document.createElement("p");
  message.className = "message message-error";
  message.setAttribute("role", "alert");
  message.textContent = xhr.responseText;
  messages.replaceChildren(message);
});
