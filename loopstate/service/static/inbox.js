"use strict";
const list = document.getElementById("approvals");
const live = document.getElementById("live");
// What the person typed but has not sent, by call: kept across live refreshes and reloads.
const drafts = {
  all: JSON.parse(sessionStorage.getItem("loopstate-drafts") || "{}"),
  get(key) { return this.all[key]; },
  set(key, value) { this.all[key] = value; this.save(); },
  delete(key) { delete this.all[key]; this.save(); },
  save() { sessionStorage.setItem("loopstate-drafts", JSON.stringify(this.all)); },
};

function callKey(item) { return `${item.run_id}/${item.call_id}`; }

async function decide(item, decision, extra, card) {
  const errors = card.querySelector(".errors");
  errors.replaceChildren();
  const body = { decision, digest: item.digest, ...extra };
  const path = `/api/runs/${encodeURIComponent(item.run_id)}/calls/${encodeURIComponent(item.call_id)}/decision`;
  const result = await ls.api("POST", path, body, crypto.randomUUID());
  if (result.ok) { drafts.delete(callKey(item)); card.remove(); refresh(); return; }
  const problems = result.data.errors || [];
  if (problems.length) {
    for (const e of problems) errors.append(ls.el("li", { text: `${e.field}: ${e.message}`, "data-field": e.field }));
  } else {
    errors.append(ls.el("li", { text: result.data.detail || `refused (${result.status})` }));
  }
}

// An external tool's call (a person's answer, a client-side tool) waits for a value, not a
// decision: text as it is typed when the tool returns a string, JSON otherwise.
function answerCard(item) {
  const key = callKey(item);
  const takesText = item.result_schema?.type === "string";
  const value = ls.el("textarea", { "aria-label": `answer for ${item.tool}`,
    placeholder: takesText ? "your answer" : "the result, as JSON" });
  value.value = drafts.get(key)?.answer || "";
  value.addEventListener("input", () => drafts.set(key, { answer: value.value }));
  const node = ls.el("article", { class: "card external", "data-call": item.call_id, "data-run": item.run_id });
  const errors = ls.el("ul", { class: "errors", role: "alert" });
  const send = async () => {
    let parsed = value.value;
    if (!takesText) {
      try { parsed = JSON.parse(value.value); } catch (e) {
        errors.replaceChildren(ls.el("li", { text: "value: not valid JSON", "data-field": "value" }));
        return;
      }
    }
    const path = `/api/runs/${encodeURIComponent(item.run_id)}/calls/${encodeURIComponent(item.call_id)}/result`;
    const result = await ls.api("POST", path, { value: parsed }, crypto.randomUUID());
    if (result.ok) { drafts.delete(key); node.remove(); refresh(); return; }
    const problems = result.data.errors || [{ field: "value", message: result.data.detail || `refused (${result.status})` }];
    errors.replaceChildren(...problems.map((e) => ls.el("li", { text: `${e.field}: ${e.message}`, "data-field": e.field })));
  };
  node.append(
    ls.el("h2", { text: item.tool }),
    ls.el("div", { class: "meta" },
      "run ", ls.el("a", { href: `/ui/runs/${encodeURIComponent(item.run_id)}`, text: item.run_id }),
      ` · call ${item.call_id} · asked ${ls.age(item.requested_at)} · waits for an answer`),
    ls.el("pre", { class: "arguments", text: ls.pretty(item.arguments) }),
    value,
    ls.el("div", { class: "actions" },
      ls.el("button", { type: "button", class: "answer", text: "Send answer", onclick: send })),
    errors);
  return node;
}

function card(item) {
  if (item.external) return answerCard(item);
  const key = callKey(item);
  const draft = drafts.get(key) || {};
  const reason = ls.el("input", { type: "text", "aria-label": `reason for ${item.tool}`, placeholder: "reason (for deny or abort)" });
  reason.value = draft.reason || "";
  reason.addEventListener("input", () => drafts.set(key, { ...drafts.get(key), reason: reason.value }));
  const edit = ls.el("textarea", { "aria-label": `edited arguments for ${item.tool}` });
  edit.value = draft.edit ?? ls.pretty(item.arguments);
  edit.addEventListener("input", () => drafts.set(key, { ...drafts.get(key), edit: edit.value }));
  const node = ls.el("article", { class: "card", "data-call": item.call_id, "data-run": item.run_id });
  const parseEdit = () => {
    try { return JSON.parse(edit.value); } catch (e) { return undefined; }
  };
  node.append(
    ls.el("h2", { text: item.tool }),
    ls.el("div", { class: "meta" },
      "run ", ls.el("a", { href: `/ui/runs/${encodeURIComponent(item.run_id)}`, text: item.run_id }),
      ` · call ${item.call_id} · requested ${ls.age(item.requested_at)}`),
    ls.el("div", { class: "meta", text: `why: ${item.reason}` }),
    ls.el("pre", { class: "arguments", text: ls.pretty(item.arguments) }),
    ls.el("div", { class: "actions" },
      ls.el("button", { type: "button", class: "approve", text: "Approve", onclick: () => decide(item, "approve", {}, node) }),
      reason,
      ls.el("button", { type: "button", class: "deny", text: "Deny", onclick: () => decide(item, "deny", { reason: reason.value || "denied" }, node) }),
      ls.el("button", { type: "button", class: "abort", text: "Abort run", onclick: () => decide(item, "abort", { reason: reason.value || "aborted" }, node) })),
    ls.el("details", {},
      ls.el("summary", { text: "Edit the arguments" }),
      edit,
      ls.el("button", { type: "button", class: "edit", text: "Run with these arguments", onclick: () => {
        const args = parseEdit();
        if (args === undefined) {
          const errors = node.querySelector(".errors");
          errors.replaceChildren(ls.el("li", { text: "arguments: not valid JSON", "data-field": "arguments" }));
          return;
        }
        decide(item, "edit", { arguments: args }, node);
      } })),
    ls.el("ul", { class: "errors", role: "alert" }));
  return node;
}

let refreshing = null;
async function refresh() {
  if (refreshing) return refreshing;
  refreshing = (async () => {
    const result = await ls.api("GET", "/api/approvals?limit=200");
    if (!result.ok) { live.textContent = result.data.detail || "cannot load"; return; }
    // A card stays as it is while its call waits (what is typed, its errors, its focus):
    // only new calls get a card, and decided ones lose theirs.
    const keep = new Map([...list.querySelectorAll("article")].map((n) => [`${n.dataset.run}/${n.dataset.call}`, n]));
    // Nodes that stay are never detached, so the focus stays where the person is.
    const items = result.data.items;
    const wanted = new Set(items.map(callKey));
    for (const [key, node] of keep) if (!wanted.has(key)) node.remove();
    list.querySelector(".empty")?.remove();
    let previous = null;
    for (const item of items) {
      let node = keep.get(callKey(item));
      if (!node) {
        node = card(item);
        if (previous) previous.after(node); else list.prepend(node);
      }
      previous = node;
    }
    if (!items.length) list.append(ls.el("p", { class: "empty", text: "Nothing is waiting for a decision." }));
    // Runs the store cannot read are named, never hidden behind the others' calls.
    list.querySelector(".damaged")?.remove();
    const damaged = result.data.damaged || [];
    if (damaged.length) {
      list.append(ls.el("ul", { class: "damaged", role: "status" },
        ...damaged.map((d) => ls.el("li", { text: `run ${d.run_id} cannot be read and is skipped: ${d.problem}` }))));
    }
  })();
  try { await refreshing; } finally { refreshing = null; }
}

function follow() {
  const source = new EventSource("/api/events");
  source.addEventListener("open", () => { live.textContent = "live"; refresh(); });
  source.addEventListener("run", () => refresh());
  source.addEventListener("error", () => { live.textContent = "reconnecting…"; });
}

refresh();
follow();
