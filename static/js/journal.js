// The journal's small helpers. Everything here is an extra: every form posts and every
// link works without it. Listeners are delegated from document, so forms that htmx swaps
// in later work too (and the CSP allows only this file, no inline code).

// Ctrl+Enter (Cmd+Enter on a Mac) in a memory's text saves it.
document.addEventListener("keydown", (event) => {
  const field = event.target;
  if (!(field instanceof HTMLTextAreaElement) || !field.hasAttribute("data-submit-shortcut")) return;
  if (event.key !== "Enter" || !(event.ctrlKey || event.metaKey)) return;
  event.preventDefault();
  const form = field.form;
  if (!form) return;
  const save = form.querySelector('button[type="submit"]:not([name])');
  form.requestSubmit(save || undefined);
});

// The floating "+" on phones opens quick capture (the timeline's, a circle's: its href) in place and puts the cursor in it.
document.addEventListener("click", (event) => {
  const opener = event.target.closest("[data-open-capture]");
  if (!opener) return;
  const target = (opener.getAttribute("href") || "").replace(/^#/, "");
  const form = document.getElementById(target || "quick-add");
  if (!form) return;
  event.preventDefault();
  form.classList.add("is-open");
  form.scrollIntoView({ block: "start", behavior: "smooth" });
  const text = form.querySelector("textarea");
  if (text) text.focus({ preventScroll: true });
});

// @mentions: typing "@An" offers the owner's people whose name (or alias) fits, as a
// listbox under the text. Up/Down choose, Enter or Tab insert "@Anna ", Escape closes.
(() => {
  const MENTION_BEFORE_CARET = /(?:^|[^\w@.])@([\p{L}][\p{L}\p{N}'’\- ]{0,40})$/u;
  let state = null; // { field, list, status, options, active, start, query, controller }
  let counter = 0;
  let timer = null;

  function close() {
    if (!state) return;
    state.list.remove();
    state.field.removeAttribute("aria-activedescendant");
    state.field.removeAttribute("aria-controls");
    if (state.controller) state.controller.abort();
    state = null;
  }

  function statusRegion(field) {
    const anchor = field.closest(".mention-anchor") || field.parentElement;
    let region = anchor.querySelector(".mention-status");
    if (!region) {
      region = document.createElement("p");
      region.className = "mention-status visually-hidden";
      region.setAttribute("role", "status");
      anchor.appendChild(region);
    }
    return region;
  }

  function highlight(index) {
    if (!state) return;
    state.active = index;
    state.list.querySelectorAll('[role="option"]').forEach((option, i) => {
      option.setAttribute("aria-selected", i === index ? "true" : "false");
      if (i === index) {
        state.field.setAttribute("aria-activedescendant", option.id);
        option.scrollIntoView({ block: "nearest" });
      }
    });
  }

  function choose(index) {
    if (!state || !state.options[index]) return;
    const { field, start } = state;
    const person = state.options[index];
    const caret = field.selectionStart;
    const before = field.value.slice(0, start);
    const after = field.value.slice(caret);
    const inserted = `@${person.name}${after.startsWith(" ") ? "" : " "}`;
    field.value = before + inserted + after;
    const position = before.length + inserted.length;
    field.setSelectionRange(position, position);
    statusRegion(field).textContent = `${person.name} added.`;
    close();
    field.focus();
  }

  function render(field, start, query, people) {
    if (!people.length) {
      close();
      statusRegion(field).textContent = "";
      return;
    }
    if (!state || state.field !== field) {
      close();
      const list = document.createElement("ul");
      counter += 1;
      list.id = `mention-list-${counter}`;
      list.className = "mention-list";
      list.setAttribute("role", "listbox");
      list.setAttribute("aria-label", "People to mention");
      (field.closest(".mention-anchor") || field.parentElement).appendChild(list);
      state = { field, list, options: [], active: 0, start, query, controller: null };
      field.setAttribute("aria-controls", list.id);
    }
    state.start = start;
    state.query = query;
    state.options = people;
    state.list.replaceChildren(
      ...people.map((person, i) => {
        const option = document.createElement("li");
        option.id = `${state.list.id}-${i}`;
        option.setAttribute("role", "option");
        option.className = "mention-option";
        const name = document.createElement("span");
        name.textContent = person.name;
        option.appendChild(name);
        const detail = person.relationship || (person.aliases || []).join(", ");
        if (detail) {
          const small = document.createElement("small");
          small.textContent = detail;
          option.appendChild(small);
        }
        // mousedown, not click: the text keeps focus (and its caret) while choosing.
        option.addEventListener("mousedown", (event) => {
          event.preventDefault();
          choose(i);
        });
        return option;
      }),
    );
    highlight(0);
    statusRegion(field).textContent =
      `${people.length} ${people.length === 1 ? "person" : "people"} found: up and down arrows to choose, Enter to add.`;
  }

  function lookUp(field) {
    const caret = field.selectionStart;
    if (caret !== field.selectionEnd) return close();
    const match = MENTION_BEFORE_CARET.exec(field.value.slice(0, caret));
    if (!match) return close();
    const query = match[1];
    const start = caret - query.length - 1;
    if (state && state.controller) state.controller.abort();
    const controller = new AbortController();
    if (state) state.controller = controller;
    const url = new URL(field.dataset.mentions, window.location.origin);
    url.searchParams.set("q", query.trim());
    fetch(url, { signal: controller.signal, headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then((response) => (response.ok ? response.json() : { people: [] }))
      .then((data) => render(field, start, query, data.people || []))
      .catch(() => {});
  }

  document.addEventListener("input", (event) => {
    const field = event.target;
    if (!(field instanceof HTMLTextAreaElement) || !field.dataset.mentions) return;
    field.setAttribute("aria-autocomplete", "list");
    clearTimeout(timer);
    timer = setTimeout(() => lookUp(field), 120);
  });

  document.addEventListener("keydown", (event) => {
    if (!state || event.target !== state.field) return;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const count = state.options.length;
    if (event.key === "ArrowDown") {
      event.preventDefault();
      highlight((state.active + 1) % count);
    } else if (event.key === "ArrowUp") {
      event.preventDefault();
      highlight((state.active - 1 + count) % count);
    } else if (event.key === "Enter" || event.key === "Tab") {
      event.preventDefault();
      choose(state.active);
    } else if (event.key === "Escape") {
      event.preventDefault();
      close();
    }
  });

  document.addEventListener("focusout", (event) => {
    if (state && event.target === state.field) setTimeout(close, 150);
  });

  document.addEventListener("htmx:beforeSwap", close);
})();
