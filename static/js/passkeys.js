// Passkeys (WebAuthn): add one on the Security page, sign in with one on the log-in page and
// on the second step. The server (accounts/passkeys.py, py_webauthn) makes the options as JSON
// with base64url strings; navigator.credentials wants ArrayBuffers, and the answer goes back
// as base64url again. Nothing here decides anything: the server checks every signature.
(() => {
  "use strict";

  const supported = () =>
    typeof window.PublicKeyCredential === "function" && !!navigator.credentials && window.isSecureContext;

  // --- base64url <-> ArrayBuffer ---------------------------------------------------------
  const toBuffer = (base64url) => {
    const base64 = base64url.replace(/-/g, "+").replace(/_/g, "/");
    const padded = base64 + "===".slice((base64.length + 3) % 4);
    const binary = atob(padded);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
    return bytes.buffer;
  };

  const toBase64url = (buffer) => {
    const bytes = new Uint8Array(buffer);
    let binary = "";
    for (let i = 0; i < bytes.length; i += 1) binary += String.fromCharCode(bytes[i]);
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  };

  const csrfToken = () => {
    const field = document.querySelector("input[name=csrfmiddlewaretoken]");
    return field ? field.value : "";
  };

  const postJson = async (url, body) => {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify(body || {}),
    });
    let data = {};
    try {
      data = await response.json();
    } catch (_error) {
      data = {};
    }
    if (!response.ok) throw new Error(data.error || "Something went wrong. Try again.");
    return data;
  };

  const say = (status, text, isError) => {
    if (!status) return;
    status.textContent = text;
    status.classList.toggle("is-error", !!isError);
    status.setAttribute("role", isError ? "alert" : "status");
  };

  // The browser's own errors, in words: cancelled, timed out, or already registered.
  const explain = (error) => {
    if (error && error.name === "NotAllowedError") return "Cancelled, or the passkey did not answer in time.";
    if (error && error.name === "InvalidStateError") return "This device already has a passkey for your account.";
    // WebAuthn takes a host name, never an address such as 127.0.0.1.
    if (error && error.name === "SecurityError") {
      return "Passkeys need a site name, not an address: open this page at localhost or the site's domain.";
    }
    return (error && error.message) || "Something went wrong. Try again.";
  };

  // A new or used passkey as the server reads it (WebAuthn's PublicKeyCredential JSON):
  // the same frame both ways, with the response's own fields after clientDataJSON.
  const credentialJson = (credential, response) => ({
    id: credential.id,
    rawId: toBase64url(credential.rawId),
    type: credential.type,
    response: { clientDataJSON: toBase64url(credential.response.clientDataJSON), ...response },
    clientExtensionResults: credential.getClientExtensionResults(),
    authenticatorAttachment: credential.authenticatorAttachment || undefined,
  });

  // --- Registration (Security page) ------------------------------------------------------
  const creationOptions = (options) => ({
    ...options,
    challenge: toBuffer(options.challenge),
    user: { ...options.user, id: toBuffer(options.user.id) },
    excludeCredentials: (options.excludeCredentials || []).map((c) => ({ ...c, id: toBuffer(c.id) })),
  });

  const registrationJson = (credential) =>
    credentialJson(credential, {
      attestationObject: toBase64url(credential.response.attestationObject),
      transports: credential.response.getTransports ? credential.response.getTransports() : [],
    });

  const setUpRegistration = (form) => {
    const status = form.querySelector("[data-passkey-status]");
    const button = form.querySelector("[data-passkey-add-button]");
    if (!supported()) {
      say(status, "This browser cannot make passkeys here (it needs a secure connection and passkey support).", true);
      return;
    }
    button.disabled = false;
    say(status, "");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const nameField = form.querySelector("input[name=name]");
      const name = nameField.value.trim();
      if (!name) {
        say(status, "Give the passkey a name first, such as the device it is on.", true);
        nameField.focus();
        return;
      }
      button.disabled = true;
      say(status, "Follow your browser's prompt to make the passkey…");
      try {
        const options = await postJson(form.dataset.optionsUrl);
        const credential = await navigator.credentials.create({ publicKey: creationOptions(options) });
        const done = await postJson(form.dataset.registerUrl, { name, credential: registrationJson(credential) });
        window.location.assign(done.redirect);
      } catch (error) {
        say(status, explain(error), true);
        button.disabled = false;
      }
    });
  };

  // --- Signing in (log-in page and the second step) ----------------------------------------
  const requestOptions = (options) => ({
    ...options,
    challenge: toBuffer(options.challenge),
    allowCredentials: (options.allowCredentials || []).map((c) => ({ ...c, id: toBuffer(c.id) })),
  });

  const assertionJson = (credential) =>
    credentialJson(credential, {
      authenticatorData: toBase64url(credential.response.authenticatorData),
      signature: toBase64url(credential.response.signature),
      userHandle: credential.response.userHandle ? toBase64url(credential.response.userHandle) : null,
    });

  const setUpSignIn = (box) => {
    if (!supported()) return;
    box.hidden = false;
    const button = box.querySelector("button");
    const status = box.querySelector("[data-passkey-status]");
    button.addEventListener("click", async () => {
      button.disabled = true;
      say(status, "Follow your browser's prompt to use your passkey…");
      try {
        const options = await postJson(box.dataset.optionsUrl);
        const credential = await navigator.credentials.get({ publicKey: requestOptions(options) });
        const done = await postJson(box.dataset.signInUrl, {
          credential: assertionJson(credential),
          next: box.dataset.next || "",
        });
        say(status, "Signed in. Opening your journal…");
        window.location.assign(done.redirect);
      } catch (error) {
        say(status, explain(error), true);
        button.disabled = false;
      }
    });
  };

  const start = () => {
    document.querySelectorAll("[data-passkey-register]").forEach(setUpRegistration);
    document.querySelectorAll("[data-passkey-sign-in]").forEach(setUpSignIn);
  };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
