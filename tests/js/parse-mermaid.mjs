// Parses Mermaid diagrams with the real Mermaid parser (mermaid 11 under jsdom: it needs a
// window for DOMPurify). Reads a JSON array of diagram texts on stdin, prints a JSON array
// of {ok, error} in the same order.
import { JSDOM } from "jsdom";

const dom = new JSDOM("<!doctype html><html><body></body></html>");
globalThis.window = dom.window;
globalThis.document = dom.window.document;

const { default: mermaid } = await import("mermaid");
mermaid.initialize({ startOnLoad: false });

let input = "";
for await (const chunk of process.stdin) input += chunk;
const results = [];
for (const text of JSON.parse(input)) {
  try {
    await mermaid.parse(text);
    results.push({ ok: true, error: null });
  } catch (err) {
    results.push({ ok: false, error: String(err?.message ?? err) });
  }
}
process.stdout.write(JSON.stringify(results));
