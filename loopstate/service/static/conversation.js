// The run's conversation as turns: the request, the assistant's text, each tool call as
// name(arguments) with its result and decision beside it; the answer marked to jump to.
// Every value is text (textContent), never markup.
"use strict";
const conversation = (() => {
  const SHORT = 60;

  function parsed(text) {
    try { return JSON.parse(text); } catch (e) { return undefined; }
  }

  function brief(value) {
    // a string as its words on one line (the whole value is under "arguments"), never escaped
    const text = typeof value === "string" ? `"${value.replace(/\s+/g, " ").trim()}"` : JSON.stringify(value);
    return text.length > SHORT ? `${text.slice(0, SHORT)}…` : text;
  }

  function signature(name, args) {
    const inside = args && typeof args === "object" && !Array.isArray(args)
      ? Object.entries(args).map(([k, v]) => `${k}=${brief(v)}`).join(", ")
      : brief(args ?? "");
    return `${name}(${inside})`;
  }

  function decision(record) {
    if (!record || !record.decision) return record && record.status === "awaiting" ? "waits for a decision" : "";
    const verb = { approve: "approved", deny: "denied", edit: "edited", abort: "aborted" }[record.decision] || record.decision;
    const who = record.decided_by ? ` by ${record.decided_by}` : "";
    const why = record.decision_reason ? `: ${record.decision_reason}` : "";
    return `${verb}${who}${why}`;
  }

  function toolCall(call, results, records) {
    const record = records.get(call.id);
    const args = record?.executed_arguments ?? record?.arguments ?? parsed(call.function.arguments) ?? call.function.arguments;
    const result = results.get(call.id);
    const said = decision(record);
    return ls.el("div", { class: "tool-call", "data-call": call.id },
      ls.el("div", { class: "call-side" },
        ls.el("code", { class: "signature", text: signature(call.function.name, args) }),
        said ? ls.el("div", { class: `decision ${record?.decision || ""}`, text: said }) : "",
        ls.el("details", {}, ls.el("summary", { text: "arguments" }), decideForm.argumentsView(args))),
      ls.el("div", { class: "result-side" },
        ls.el("div", { class: "label", text: "result" }),
        ls.el("pre", { class: "value", text: result ?? "(no result yet)" })));
  }

  function turn(role, ...children) {
    return ls.el("li", { class: `turn ${role}` }, ls.el("div", { class: "who", text: role }), ...children);
  }

  function render(run) {
    const results = new Map(run.messages.filter((m) => m.role === "tool").map((m) => [m.tool_call_id, m.content]));
    const records = new Map(run.calls.map((c) => [c.call_id, c]));
    const turns = [];
    let answer = null;
    for (const m of run.messages) {
      if (m.role === "tool") continue; // shown beside its call
      if (m.role === "system") {
        turns.push(turn("instructions", ls.el("details", {}, ls.el("summary", { text: "the agent's instructions" }), ls.el("pre", { class: "value", text: m.content }))));
        continue;
      }
      const body = [];
      if (m.content) body.push(ls.el("div", { class: "text", text: m.content }));
      for (const call of m.tool_calls || []) body.push(toolCall(call, results, records));
      const node = turn(m.role, ...body);
      if (m.role === "assistant" && m.content && !(m.tool_calls || []).length) answer = node;
      turns.push(node);
    }
    if (answer && run.status === "done") { answer.id = "answer"; answer.classList.add("answer"); }
    return turns;
  }

  return { render };
})();
