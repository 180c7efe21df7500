// Shared helpers. Every value reaches the page through textContent: never parsed as HTML.
"use strict";
const ls = {
  el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value);
    }
    for (const child of children) node.append(child);
    return node;
  },
  async api(method, path, body, key) {
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (key) headers["Idempotency-Key"] = key;
    const response = await fetch(path, {
      method, headers, credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const data = await response.json().catch(() => ({}));
    return { ok: response.ok, status: response.status, data };
  },
  age(seconds) {
    const s = Math.max(0, Date.now() / 1000 - seconds);
    if (s < 60) return `${Math.round(s)} s ago`;
    if (s < 3600) return `${Math.round(s / 60)} min ago`;
    return `${(s / 3600).toFixed(1)} h ago`;
  },
  time(seconds) { return new Date(seconds * 1000).toLocaleString(); },
  clock(seconds) {
    const at = new Date(seconds * 1000);
    return at.toDateString() === new Date().toDateString() ? at.toLocaleTimeString() : at.toLocaleString();
  },
  pretty(value) { return JSON.stringify(value, null, 2); },
};
