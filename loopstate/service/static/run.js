"use strict";
const runId = decodeURIComponent(location.pathname.split("/").pop());
const base = `/api/runs/${encodeURIComponent(runId)}`;
const $ = (id) => document.getElementById(id);
let lastSeq = 0;
let drawn = 0;
let loaded = false; // a run this identity cannot see is never followed

mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme: "neutral",
  themeVariables: { fontSize: "16px" }, state: { useMaxWidth: true } });

async function drawDiagram() {
  const text = await fetch(`${base}/diagram.mmd`, { credentials: "same-origin" }).then((r) => r.text());
  const { svg } = await mermaid.render(`machine${++drawn}`, text);
  const holder = $("diagram");
  holder.innerHTML = svg; // Mermaid's own SVG of the machine (its labels come from the code, securityLevel strict)
  const current = text.match(/^\s*class (\S+) current$/m);
  holder.dataset.current = current ? current[1] : "";
}

function row(cells) {
  return ls.el("tr", {}, ...cells.map((c) => ls.el("td", { text: c ?? "" })));
}

let loading = null;
let again = false;
async function reload() {
  if (loading) { again = true; return loading; }
  loading = (async () => {
    do { again = false; await load(); } while (again);
  })();
  try { await loading; } finally { loading = null; }
}

async function load() {
  const result = await ls.api("GET", base);
  if (!result.ok) { $("live").textContent = result.data.detail || "cannot load"; return; }
  loaded = true;
  const run = result.data;
  $("title").textContent = `Run ${run.run_id}`;
  $("status").textContent = run.status;
  $("where").textContent = run.state === run.status ? "" : ` (in ${run.state})`;
  const u = run.usage;
  $("usage").textContent = `${run.steps} model calls · ${u.prompt_tokens} prompt + ${u.completion_tokens} completion tokens` +
    (u.cost_usd == null ? "" : ` · $${u.cost_usd.toFixed(4)}`);
  showForkedFrom(run.forked_from);
  showFailure(run);
  $("pending-section").hidden = !run.pending.length;
  decideForm.sync($("pending"), run.pending, reload);
  const turns = conversation.render(run);
  $("conversation").replaceChildren(...turns);
  $("jump").hidden = !document.getElementById("answer");
  $("transitions").replaceChildren(...run.transitions.map((t) => {
    const tr = row([String(t.seq), `${t.from} → ${t.to}`, t.event, t.actor, t.reason, ls.clock(t.time)]);
    if (run.forked_from && t.seq <= run.forked_from.seq) tr.classList.add("inherited");
    tr.append(ls.el("td", {}, ls.el("button", { type: "button", text: "fork here",
      "aria-label": `fork here, at transition ${t.seq}`, onclick: () => forkAt(t.seq) })));
    return tr;
  }));
  await drawDiagram();
}

function showFailure(run) {
  const failed = run.status === "failed" || run.status === "aborted";
  $("failure").hidden = !failed;
  if (!failed) return;
  const why = run.failure_text || run.error || run.stop_reason || "no reason was recorded";
  $("failure-text").textContent = run.state === "model_failed"
    ? `The model call failed and its retries are spent: ${why}. Retry calls the model again for the same step.`
    : `The run ${run.status === "aborted" ? "was aborted" : "failed"}: ${why}`;
  const actions = run.state === "model_failed" ? [
    ls.el("button", { type: "button", class: "retry", text: "Retry the model call", onclick: () => act("retry", {}) }),
    ls.el("button", { type: "button", class: "abort", text: "Abort run", onclick: () => act("abort", { reason: "aborted after a failed model call" }) }),
  ] : [];
  $("failure-actions").replaceChildren(...actions);
}

async function act(what, body) {
  const result = await ls.api("POST", `${base}/${what}`, body, crypto.randomUUID());
  $("failure-errors").replaceChildren(...(result.ok ? [] : [ls.el("li", { text: result.data.detail || `refused (${result.status})` })]));
  reload();
}

function showForkedFrom(origin) {
  const holder = $("forked");
  holder.hidden = !origin;
  if (!origin) return;
  const link = ls.el("a", { href: `/ui/runs/${encodeURIComponent(origin.run_id)}`, text: origin.run_id });
  holder.replaceChildren(`forked from run `, link, ` at transition ${origin.seq} by ${origin.by}`);
}

async function forkAt(seq) {
  const result = await ls.api("POST", `${base}/fork`, { at: seq }, crypto.randomUUID());
  if (!result.ok) { $("live").textContent = result.data.detail || "cannot fork"; return; }
  location.assign(`/ui/runs/${encodeURIComponent(result.data.run_id)}`);
}

function follow() {
  const source = new EventSource(`${base}/events`);
  source.addEventListener("open", () => { $("live").textContent = "live"; });
  source.addEventListener("transition", (event) => {
    const t = JSON.parse(event.data);
    if (t.seq <= lastSeq) return;
    lastSeq = t.seq;
    reload();
  });
  source.addEventListener("error", () => { $("live").textContent = "reconnecting…"; });
}

reload().then(() => { if (loaded) follow(); });
