"use strict";
const cards = document.getElementById("cards");
const live = document.getElementById("live");
const LIMIT = 200;

function count(id, n, more) { document.getElementById(`count-${id}`).textContent = `(${n}${more ? "+" : ""})`; }

function showTab(name) {
  for (const tab of document.querySelectorAll("[role=tab]")) {
    const selected = tab.dataset.tab === name;
    tab.setAttribute("aria-selected", String(selected));
    document.getElementById(tab.getAttribute("aria-controls")).hidden = !selected;
  }
}
for (const tab of document.querySelectorAll("[role=tab]")) tab.addEventListener("click", () => showTab(tab.dataset.tab));
document.getElementById("mine").addEventListener("change", () => refresh());

async function retry(run, row) {
  const result = await ls.api("POST", `/api/runs/${encodeURIComponent(run.run_id)}/retry`, {}, crypto.randomUUID());
  row.querySelector(".errors").replaceChildren(...(result.ok ? [] : [ls.el("li", { text: result.data.detail || `refused (${result.status})` })]));
  if (result.ok) refresh();
}

async function abort(run, row) {
  const result = await ls.api("POST", `/api/runs/${encodeURIComponent(run.run_id)}/abort`, { reason: "aborted from the inbox" }, crypto.randomUUID());
  row.querySelector(".errors").replaceChildren(...(result.ok ? [] : [ls.el("li", { text: result.data.detail || `refused (${result.status})` })]));
  if (result.ok) refresh();
}

function runRow(run) {
  const row = ls.el("div", { class: "card run-row", "data-run": run.run_id },
    ls.el("h3", {}, ls.el("a", { href: `/ui/runs/${encodeURIComponent(run.run_id)}`, text: run.run_id })),
    ls.el("div", { class: "meta", text: `${run.state} · ${run.steps} model calls · updated ${ls.age(run.updated_at)}` }));
  const why = run.failure_text || run.error || run.stop_reason;
  if (why) row.append(ls.el("p", { class: "reason", text: why }));
  if (run.state === "model_failed") {
    row.append(ls.el("div", { class: "actions" },
      ls.el("button", { type: "button", class: "retry", text: "Retry the model call", onclick: () => retry(run, row) }),
      ls.el("button", { type: "button", class: "abort", text: "Abort run", onclick: () => abort(run, row) })));
  }
  row.append(ls.el("ul", { class: "errors", role: "alert" }));
  return row;
}

async function listRuns(status, holder, empty) {
  const result = await ls.api("GET", `/api/runs?status=${status}&limit=${LIMIT}`);
  if (!result.ok) return;
  const runs = result.data.items;
  count(holder, runs.length, result.data.next_cursor);
  const panel = document.getElementById(holder);
  panel.replaceChildren(...(runs.length ? runs.map(runRow) : [ls.el("p", { class: "empty", text: empty })]));
}

async function listApprovals() {
  const mine = document.getElementById("mine").checked ? "&assignee=mine" : "";
  const result = await ls.api("GET", `/api/approvals?limit=${LIMIT}${mine}`);
  if (!result.ok) { live.textContent = result.data.detail || "cannot load"; return; }
  const items = result.data.items;
  count("waiting", items.length, result.data.next_cursor);
  cards.querySelector(".empty")?.remove();
  decideForm.sync(cards, items, refresh);
  if (!items.length) cards.append(ls.el("p", { class: "empty", text: "Nothing is waiting for a decision." }));
  // Runs the store cannot read are named, never hidden behind the others' calls.
  cards.querySelector(".damaged")?.remove();
  const damaged = result.data.damaged || [];
  if (damaged.length) {
    cards.append(ls.el("ul", { class: "damaged", role: "status" },
      ...damaged.map((d) => ls.el("li", { text: `run ${d.run_id} cannot be read and is skipped: ${d.problem}` }))));
  }
}

// Runs the served agent would refuse at resume (a deploy changed what they need): marked.
async function listIncompatible() {
  const refused = await ls.api("GET", "/api/runs?compatible=false");
  cards.querySelector(".incompatible")?.remove();
  if (refused.ok && refused.data.items.length) {
    cards.append(ls.el("ul", { class: "incompatible", role: "status" },
      ...refused.data.items.map((r) => ls.el("li", { "data-run": r.run_id, text: `run ${r.run_id} cannot resume under the agent served here (incompatible): ${r.why.join("; ")}` }))));
  }
}

// One refresh at a time; an update that arrives during one makes it go round again (every
// fetch of it, so an update is never left to a round that had already read past it).
let refreshing = null;
let again = false;
async function refresh() {
  if (refreshing) { again = true; return refreshing; }
  refreshing = (async () => {
    do {
      again = false;
      await Promise.all([listApprovals(), listRuns("failed", "failed", "No run has failed."),
        listRuns("done", "done", "No run has finished yet."), listIncompatible()]);
    } while (again);
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
