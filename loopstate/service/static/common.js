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
  // A span of seconds as a person reads it: "45 s", "12 min", "2.5 h".
  span(s) {
    if (s < 60) return `${Math.round(s)} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min`;
    return `${(s / 3600).toFixed(1)} h`;
  },
  // When a pending call's decision is due (`decide_within`): the time left, or "expired".
  due(at) {
    const left = at - Date.now() / 1000;
    if (left <= 0) return { expired: true, text: `expired ${ls.span(-left)} ago (was due ${ls.clock(at)})` };
    return { expired: false, text: `due in ${ls.span(left)} (at ${ls.clock(at)})` };
  },
  // A deadline's line, kept current each second while it is on the page.
  deadline(at) {
    const node = ls.el("div", { class: "deadline", "data-deadline": String(at) });
    ls.tick(node);
    return node;
  },
  tick(node) {
    const due = ls.due(Number(node.dataset.deadline));
    node.textContent = due.text;
    node.classList.toggle("expired", due.expired);
  },
  // Whose decision is due first: soonest deadline first, those without one last.
  byDeadline(a, b) {
    const at = (item) => (item.deadline == null ? Infinity : item.deadline);
    return at(a) - at(b) || (a.requested_at || 0) - (b.requested_at || 0);
  },
};
setInterval(() => { for (const node of document.querySelectorAll(".deadline[data-deadline]")) ls.tick(node); }, 1000);
