// Agent and circle chats: <form data-chat-form data-chat-log="chat-log" data-agent-name="…">.
// The question shows at once with a typing line while the agent answers; Enter sends and
// Shift+Enter starts a new line; what was typed stays after a failed reply, with a Retry.
// Listeners here, not hx-on attributes: those are evaluated code, which the CSP refuses.
// Without JavaScript the forms post and the server re-renders the page.
(() => {
  const chatForm = (element) =>
    element instanceof Element ? element.closest("form[data-chat-form]") : null;

  const logOf = (form) => document.getElementById(form.dataset.chatLog || "chat-log");

  const removePending = (form) => {
    const log = logOf(form);
    if (log) log.querySelectorAll("[data-chat-pending]").forEach((item) => item.remove());
  };

  const pendingItem = (className, who, text) => {
    const item = document.createElement("li");
    item.className = `chat-message ${className}`;
    item.dataset.chatPending = "";
    const head = document.createElement("div");
    head.className = "chat-who";
    head.textContent = who;
    const body = document.createElement("div");
    body.className = "chat-text";
    body.textContent = text; // never innerHTML: this is what the user typed
    item.append(head, body);
    return item;
  };

  // Enter sends; Shift+Enter (or an input method still composing) is left alone.
  document.addEventListener("keydown", (event) => {
    const field = event.target;
    if (!(field instanceof HTMLTextAreaElement) || !chatForm(field)) return;
    if (event.key !== "Enter" || event.shiftKey || event.isComposing) return;
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    event.preventDefault();
    if (field.value.trim()) field.form.requestSubmit();
  });

  const showTyping = (form, log, agentName) => {
    const typing = pendingItem("chat-assistant chat-typing", agentName || "The agent", "is typing…");
    typing.setAttribute("role", "status");
    const dots = document.createElement("span");
    dots.className = "typing-dots";
    dots.setAttribute("aria-hidden", "true");
    dots.append(document.createElement("span"), document.createElement("span"), document.createElement("span"));
    typing.querySelector(".chat-text").prepend(dots, " ");
    log.append(typing);
    typing.scrollIntoView({ block: "nearest" });
  };

  document.addEventListener("htmx:beforeRequest", (event) => {
    const form = event.detail.elt;
    if (!(form instanceof HTMLFormElement)) return;
    if (form.matches("form[data-chat-retry-form]")) {
      // Asking a failed question again: the failed pair goes when the new turn arrives.
      const log = document.getElementById("chat-log");
      if (log) showTyping(form, log, form.dataset.agentName);
      return;
    }
    if (!form.matches("form[data-chat-form]")) return;
    const log = logOf(form);
    const field = form.querySelector("textarea[name=message]");
    if (!log || !field || !field.value.trim()) return;
    removePending(form);
    log.querySelectorAll("[data-chat-failed]").forEach((item) => item.remove());
    log.append(pendingItem("chat-user chat-pending", "You", field.value.trim()));
    showTyping(form, log, form.dataset.agentName);
  });

  document.addEventListener("htmx:afterRequest", (event) => {
    const source = event.detail.elt;
    if (!(source instanceof HTMLFormElement)) return;
    if (!source.matches("form[data-chat-form], form[data-chat-retry-form]")) return;
    const log = document.getElementById("chat-log");
    if (log) log.querySelectorAll("[data-chat-pending]").forEach((item) => item.remove());
    if (!log) return;
    if (!event.detail.successful) {
      // Keepsake itself did not answer: keep the text and offer to send it again.
      const failed = document.createElement("li");
      failed.className = "chat-message chat-error";
      failed.dataset.chatFailed = "";
      failed.setAttribute("role", "alert");
      const text = document.createElement("p");
      text.textContent = "Your message was not sent: Keepsake did not answer. Your text is still in the box.";
      const retry = document.createElement("button");
      retry.type = "button";
      retry.className = "button button-small";
      retry.dataset.chatRetry = "";
      retry.textContent = "Retry";
      failed.append(text, retry);
      log.append(failed);
    }
  });

  // A reply swapped into the log (a send or a retry): the box empties, unless the reply
  // failed, when the question stays there to send again. On the log, not the form: a
  // retry's form is gone with the failed reply by the time its request ends.
  document.addEventListener("htmx:afterSwap", (event) => {
    const log = document.getElementById("chat-log");
    if (!log || event.detail.target !== log) return;
    log.querySelectorAll("[data-chat-pending]").forEach((item) => item.remove());
    const last = log.querySelector(".chat-message:last-of-type");
    if (last && last.classList.contains("chat-error")) return;
    const field = document.querySelector("form[data-chat-form] textarea[name=message]");
    if (field) field.value = "";
  });

  document.addEventListener("click", (event) => {
    const button = event.target instanceof Element ? event.target.closest("[data-chat-retry]") : null;
    if (!button) return;
    const form = document.querySelector("form[data-chat-form]");
    if (!form) return;
    button.closest("[data-chat-failed]")?.remove();
    form.requestSubmit();
  });

  // A chat opens at its latest message, with the box to write in on screen (a phone
  // would otherwise show the first message and leave the box below the fold).
  const openAtLatest = () => {
    const log = document.getElementById("chat-log");
    const form = document.querySelector("form[data-chat-form]");
    if (!log || !form || !log.querySelector(".chat-message")) return;
    log.scrollTop = log.scrollHeight;
    if (window.location.hash) return;
    form.scrollIntoView({ block: "end" });
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", openAtLatest);
  else openAtLatest();

  // After a reply arrives, bring it into view and give the box back its focus.
  document.addEventListener("htmx:afterSettle", (event) => {
    const log = document.getElementById("chat-log");
    if (!log || !(event.detail.target === log || event.detail.target?.contains(log))) return;
    const last = log.querySelector(".chat-message:last-of-type");
    if (last) last.scrollIntoView({ block: "nearest" });
    const field = document.querySelector("form[data-chat-form] textarea[name=message]");
    if (field && document.activeElement === document.body) field.focus();
  });
})();
