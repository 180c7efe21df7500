// The decision form of a pending call, shared by the inbox and the run page: approve, deny
// (reason, and the message the model gets), edit, abort, remember; or, for an external
// call, the answer. Every value a model chose reaches the page as text, never as markup.
"use strict";
const decideForm = (() => {
  // What the person typed but has not sent, by call: kept across live refreshes and reloads.
  const drafts = {
    all: JSON.parse(sessionStorage.getItem("loopstate-drafts") || "{}"),
    get(key) { return this.all[key]; },
    set(key, value) { this.all[key] = value; this.save(); },
    patch(key, value) { this.set(key, { ...this.get(key), ...value }); },
    delete(key) { delete this.all[key]; this.save(); },
    save() { sessionStorage.setItem("loopstate-drafts", JSON.stringify(this.all)); },
  };
  const FOLD = 400;
  const key = (item) => `${item.run_id}/${item.call_id}`;
  const callPath = (item, what) =>
    `/api/runs/${encodeURIComponent(item.run_id)}/calls/${encodeURIComponent(item.call_id)}/${what}`;

  function showErrors(node, problems) {
    node.querySelector(".errors").replaceChildren(...problems.map((e) =>
      ls.el("li", { text: e.field ? `${e.field}: ${e.message}` : e.message, "data-field": e.field || "" })));
  }

  async function send(item, what, body, node, done) {
    const result = await ls.api("POST", callPath(item, what), body, crypto.randomUUID());
    if (result.ok) { drafts.delete(key(item)); node.remove(); done(); return; }
    showErrors(node, result.data.errors || [{ message: result.data.detail || `refused (${result.status})` }]);
  }

  // A value as a person reads it: a string as its text (a long one folded), the rest as JSON.
  function value(v) {
    if (typeof v !== "string") return ls.el("pre", { class: "value", text: ls.pretty(v) });
    const lines = v.split("\n").length;
    if (v.length <= FOLD && lines <= 12) return ls.el("pre", { class: "value", text: v });
    return ls.el("details", { class: "folded" },
      ls.el("summary", { text: `${lines} lines, ${v.length} characters` }),
      ls.el("pre", { class: "value", text: v }));
  }

  function argumentsView(args) {
    if (args === null || typeof args !== "object" || Array.isArray(args)) {
      return ls.el("div", { class: "arguments" }, value(args));
    }
    const list = ls.el("dl", { class: "arguments" });
    for (const [name, v] of Object.entries(args)) list.append(ls.el("dt", { text: name }), ls.el("dd", {}, value(v)));
    if (!Object.keys(args).length) list.append(ls.el("dd", { class: "meta", text: "(no arguments)" }));
    return list;
  }

  function diffView(diff) {
    const pre = ls.el("pre", { class: "diff", "aria-label": "what approving changes in the workspace" });
    for (const line of diff.split("\n")) {
      const kind = line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : "";
      pre.append(ls.el("span", { class: kind, text: `${line}\n` }));
    }
    return pre;
  }

  function context(item, waits) {
    const parts = [
      ls.el("h3", { text: item.tool }),
      ls.el("div", { class: "meta" },
        `${item.agent || "agent"} · run `, ls.el("a", { href: `/ui/runs/${encodeURIComponent(item.run_id)}`, text: item.run_id }),
        ` · call ${item.call_id} · ${waits} ${ls.age(item.requested_at)}`),
    ];
    if (item.request) parts.push(ls.el("div", { class: "request" }, ls.el("span", { class: "label", text: "asked: " }), item.request));
    if (item.description) parts.push(ls.el("div", { class: "description" }, ls.el("span", { class: "label", text: "tool: " }), item.description));
    parts.push(ls.el("div", { class: "why" }, ls.el("span", { class: "label", text: "why it waits: " }), item.reason));
    if (item.deadline != null) parts.push(ls.deadline(item.deadline));
    if (item.assignee) parts.push(ls.el("div", { class: "meta", text: `assigned to ${item.assignee}` }));
    if (item.metadata && Object.keys(item.metadata).length) {
      parts.push(ls.el("details", {}, ls.el("summary", { text: "gate details" }), ls.el("pre", { text: ls.pretty(item.metadata) })));
    }
    parts.push(argumentsView(item.arguments));
    if (item.diff) parts.push(ls.el("h4", { text: "What approving changes" }), diffView(item.diff));
    return parts;
  }

  function labelled(text, control) {
    const id = `f${crypto.randomUUID()}`;
    control.id = id;
    return [ls.el("label", { for: id, text }), control];
  }

  // An external tool's call waits for a value, not a decision: text as typed when the tool
  // returns a string, JSON otherwise.
  function answerCard(item, done) {
    const k = key(item);
    const takesText = item.result_schema?.type === "string";
    const answer = ls.el("textarea", { "aria-label": `answer for ${item.tool}`,
      placeholder: takesText ? "your answer" : "the result, as JSON" });
    answer.value = drafts.get(k)?.answer || "";
    answer.addEventListener("input", () => drafts.set(k, { answer: answer.value }));
    const node = ls.el("article", { class: "card external", "data-call": item.call_id, "data-run": item.run_id });
    const submit = () => {
      let parsed = answer.value;
      if (!takesText) {
        try { parsed = JSON.parse(answer.value); } catch (e) {
          showErrors(node, [{ field: "value", message: "not valid JSON" }]);
          return;
        }
      }
      send(item, "result", { value: parsed }, node, done);
    };
    node.append(...context(item, "waits for an answer, asked"), answer,
      ls.el("div", { class: "actions" },
        ls.el("button", { type: "button", class: "answer", text: "Send answer", onclick: submit })),
      ls.el("ul", { class: "errors", role: "alert" }));
    return node;
  }

  function decisionCard(item, done) {
    const k = key(item);
    const draft = drafts.get(k) || {};
    const field = (tag, attrs, name, initial) => {
      const control = ls.el(tag, attrs);
      control.value = initial;
      control.addEventListener("input", () => drafts.patch(k, { [name]: control.value }));
      return control;
    };
    const reason = field("input", { type: "text", placeholder: "reason (for deny or abort)" }, "reason", draft.reason || "");
    const message = field("input", { type: "text", placeholder: "what the model is told (optional)" }, "message", draft.message || "");
    const edit = field("textarea", { "aria-label": `edited arguments for ${item.tool}` }, "edit", draft.edit ?? ls.pretty(item.arguments));
    const remember = ls.el("input", { type: "checkbox" });
    const node = ls.el("article", { class: "card", "data-call": item.call_id, "data-run": item.run_id });
    const decide = (decision, extra = {}) => send(item, "decision", { decision, digest: item.digest, ...extra }, node, done);
    const denial = () => ({ reason: reason.value || "denied", ...(message.value ? { message: message.value } : {}),
      ...(remember.checked ? { remember: true } : {}) });
    const runEdited = () => {
      let args;
      try { args = JSON.parse(edit.value); } catch (e) {
        showErrors(node, [{ field: "arguments", message: "not valid JSON" }]);
        return;
      }
      decide("edit", { arguments: args });
    };
    node.append(...context(item, "requested"),
      ls.el("div", { class: "actions" },
        ls.el("button", { type: "button", class: "approve", text: "Approve",
          onclick: () => decide("approve", remember.checked ? { remember: true } : {}) }),
        ls.el("button", { type: "button", class: "deny", text: "Deny", onclick: () => decide("deny", denial()) }),
        ls.el("button", { type: "button", class: "abort", text: "Abort run",
          onclick: () => decide("abort", { reason: reason.value || "aborted" }) })),
      ls.el("div", { class: "fields" },
        ...labelled(`Reason for ${item.tool}`, reason),
        ...labelled("Message to the model", message),
        ls.el("span", { class: "check" }, ...labelled(`Decide ${item.tool}'s later calls in this run alike`, remember))),
      ls.el("details", {},
        ls.el("summary", { text: "Edit the arguments" }),
        edit,
        ls.el("button", { type: "button", class: "edit", text: "Run with these arguments", onclick: runEdited })),
      ls.el("ul", { class: "errors", role: "alert" }));
    return node;
  }

  // Whoever may only view (role viewer) sees each call, and no control that would be refused.
  const me = ls.api("GET", "/api/me").then((r) => (r.ok ? r.data : { may_act: true }));

  function card(item, done) {
    const node = item.external ? answerCard(item, done) : decisionCard(item, done);
    me.then((who) => {
      if (who.may_act) return;
      for (const control of node.querySelectorAll("button, input, textarea")) control.disabled = true;
      node.querySelector(".errors").before(ls.el("p", { class: "meta viewer", text: `${who.name} may view this call, not decide it` }));
    });
    return node;
  }

  // Show `items` in `holder`, whose decision is due first first (`ls.byDeadline`, as
  // `loopstate runs pending` lists them): a card stays as it is while its call waits (what is
  // typed, its errors, its focus: nodes that stay are never detached); only new calls get a
  // card. A call's deadline never changes while it waits, so kept cards stay in order.
  function sync(holder, given, done) {
    const items = [...given].sort(ls.byDeadline);
    const keep = new Map([...holder.querySelectorAll("article")].map((n) => [`${n.dataset.run}/${n.dataset.call}`, n]));
    const wanted = new Set(items.map(key));
    for (const [k, node] of keep) if (!wanted.has(k)) node.remove();
    let previous = null;
    for (const item of items) {
      let node = keep.get(key(item));
      if (!node) {
        node = card(item, done);
        if (previous) previous.after(node); else holder.prepend(node);
      }
      previous = node;
    }
  }

  return { card, sync, argumentsView };
})();
