// Markdown of model output (web/src/markdown.ts): what it recognises, and
// that markup in the text stays text.
import test from "node:test";
import assert from "node:assert/strict";
import { load } from "./load.mjs";

const { parse, inline } = await load("markdown");

test("HTML in the text is text, never an element", () => {
  const src = '<img src=x onerror=alert(1)> <script>alert(1)</script>';
  assert.deepEqual(parse(src), [{ t: "p", c: [{ t: "text", v: src }] }]);
});

test("code fences keep their content verbatim, an unclosed fence runs to the end", () => {
  assert.deepEqual(parse("a\n```js\nlet x = '<b>';\n```\nb"), [
    { t: "p", c: [{ t: "text", v: "a" }] },
    { t: "pre", lang: "js", v: "let x = '<b>';" },
    { t: "p", c: [{ t: "text", v: "b" }] },
  ]);
  assert.deepEqual(parse("```\nstill streaming"), [{ t: "pre", lang: "", v: "still streaming" }]);
});

test("headings, lists, quotes", () => {
  assert.deepEqual(parse("# T\n- a\n- b\n1. c\n> q").map((n) => n.t), ["h", "ul", "ol", "quote"]);
  assert.equal(parse("- a\n- b")[0].items.length, 2);
});

test("inline code, bold, italic; unmatched markers stay", () => {
  assert.deepEqual(inline("a `x<y>` **b** *c* 2*3"), [
    { t: "text", v: "a " }, { t: "code", v: "x<y>" }, { t: "text", v: " " },
    { t: "strong", c: [{ t: "text", v: "b" }] }, { t: "text", v: " " },
    { t: "em", c: [{ t: "text", v: "c" }] }, { t: "text", v: " 2*3" },
  ]);
  assert.deepEqual(inline("snake_case_name"), [{ t: "text", v: "snake_case_name" }]);
});

test("links: http(s) only; javascript: and data: stay text", () => {
  assert.deepEqual(inline("[x](https://a.example/p)"), [{ t: "link", href: "https://a.example/p", c: [{ t: "text", v: "x" }] }]);
  for (const bad of ["[x](javascript:alert(1))", "[x](data:text/html,hi)", "[x](//evil)"]) {
    assert.ok(inline(bad).every((n) => n.t === "text"), bad);
  }
});
