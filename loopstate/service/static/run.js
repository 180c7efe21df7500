"use strict";
const runId = decodeURIComponent(location.pathname.split("/").pop());
const base = `/api/runs/${encodeURIComponent(runId)}`;
const $ = (id) => document.getElementById(id);
let lastSeq = 0;
let drawn = 0;

mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme: "neutral" });

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
  const run = result.data;
  $("title").textContent = `Run ${run.run_id}`;
  $("status").textContent = run.status;
  $("state").textContent = run.state;
  const u = run.usage;
  $("usage").textContent = `${run.steps} model calls · ${u.prompt_tokens} prompt + ${u.completion_tokens} completion tokens` +
    (u.cost_usd == null ? "" : ` · $${u.cost_usd.toFixed(4)}`);
  showForkedFrom(run.forked_from);
  $("transitions").replaceChildren(...run.transitions.map((t) => {
    const tr = row([String(t.seq), `${t.from} → ${t.to}`, t.event, t.actor, t.reason, ls.time(t.time)]);
    if (run.forked_from && t.seq <= run.forked_from.seq) tr.classList.add("inherited");
    tr.append(ls.el("td", {}, ls.el("button", { type: "button", text: "fork here", onclick: () => forkAt(t.seq) })));
    return tr;
  }));
  $("calls").replaceChildren(...run.calls.map((c) =>
    row([c.call_id, c.tool, ls.pretty(c.executed_arguments ?? c.arguments), c.status, c.decision, c.decided_by])));
  $("messages").replaceChildren(...run.messages.map((m) => ls.el("div", {},
    ls.el("strong", { text: m.role }),
    ls.el("pre", { text: m.content ?? ls.pretty(m.tool_calls ?? "") }))));
  await drawDiagram();
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

reload().then(follow);
