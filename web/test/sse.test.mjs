// The playground's SSE client (web/src/sse.ts): the event-stream parser at
// every chunk boundary, the Anthropic stream folded into a message, and
// streamMessage() over a fake fetch (HTTP errors, aborts, split UTF-8).
import test from "node:test";
import assert from "node:assert/strict";
import { load } from "./load.mjs";

const { SseParser, MessageAccumulator, streamMessage } = await load("sse");

const frame = (event, data) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
const kStream =
  frame("message_start", { type: "message_start", message: { id: "msg_1", model: "m", usage: { input_tokens: 7, cache_read_input_tokens: 4, output_tokens: 1 } } }) +
  ": keep-alive comment\n\n" +
  frame("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }) +
  frame("ping", { type: "ping" }) +
  frame("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Héllo " } }) +
  frame("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "wörld 🌊" } }) +
  frame("content_block_stop", { type: "content_block_stop", index: 0 }) +
  frame("content_block_start", { type: "content_block_start", index: 1, content_block: { type: "tool_use", id: "toolu_1", name: "get_weather", input: {} } }) +
  frame("content_block_delta", { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '{"city":' } }) +
  frame("content_block_delta", { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '"Paris"}' } }) +
  frame("content_block_stop", { type: "content_block_stop", index: 1 }) +
  frame("message_delta", { type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 12 } }) +
  frame("message_stop", { type: "message_stop" });

function parseAll(chunks) {
  const p = new SseParser();
  return chunks.flatMap((c) => p.push(c));
}

test("parser: one chunk gives every event with data, comments skipped", () => {
  const evs = parseAll([kStream]);
  assert.equal(evs.length, 12);
  assert.deepEqual(evs.map((e) => e.event).slice(0, 3), ["message_start", "content_block_start", "ping"]);
});

test("parser: the same events whatever the chunk boundaries", () => {
  const whole = parseAll([kStream]);
  for (let cut = 1; cut < kStream.length; cut += 7) {
    assert.deepEqual(parseAll([kStream.slice(0, cut), kStream.slice(cut)]), whole, `cut at ${cut}`);
  }
  assert.deepEqual(parseAll([...kStream]), whole, "one character at a time");
});

test("parser: CRLF and CR line ends, also split between chunks", () => {
  const crlf = kStream.replace(/\n/g, "\r\n");
  const cr = kStream.replace(/\n/g, "\r");
  const whole = parseAll([kStream]);
  assert.deepEqual(parseAll([crlf]), whole);
  assert.deepEqual(parseAll([cr]), whole);
  const i = crlf.indexOf("\r\n") + 1; // between \r and \n
  assert.deepEqual(parseAll([crlf.slice(0, i), crlf.slice(i)]), whole);
});

test("parser: multi-line data, default event name, field without value, one space stripped", () => {
  const evs = parseAll(["data: a\ndata:  b\ndata\nretry: 5\nid: 3\n\nevent: x\n\n"]);
  assert.deepEqual(evs, [{ event: "message", data: "a\n b\n" }]);
});

test("parser: an unterminated last event is not emitted", () => {
  const p = new SseParser();
  assert.deepEqual(p.push("event: e\ndata: 1\n"), []);
  p.end();
  assert.deepEqual(p.push("\n"), []);
});

test("accumulator: text, tool call, usage and stop reason", () => {
  const m = new MessageAccumulator();
  let added = "";
  for (const ev of parseAll([kStream])) added += m.apply(ev);
  assert.equal(m.text(), "Héllo wörld 🌊");
  assert.equal(added, 'Héllo wörld 🌊{"city":"Paris"}');
  assert.equal(m.id, "msg_1");
  assert.equal(m.stop_reason, "tool_use");
  assert.deepEqual(m.usage, { input_tokens: 7, cache_read_input_tokens: 4, output_tokens: 12 });
  assert.ok(m.done);
  assert.deepEqual(m.content(), [
    { type: "text", text: "Héllo wörld 🌊" },
    { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
  ]);
});

test("accumulator: an SSE error event is kept with its reason; bad JSON throws", () => {
  const m = new MessageAccumulator();
  m.apply({ event: "error", data: JSON.stringify({ type: "error", error: { type: "overloaded_error", message: "busy", detail: { reason: "overloaded" } } }) });
  assert.deepEqual(m.error, { type: "overloaded_error", message: "busy", reason: "overloaded" });
  assert.throws(() => m.apply({ event: "content_block_delta", data: "{nope" }), /malformed/);
});

// A fetch that answers with `chunks` (byte arrays) as a streamed body.
function fakeFetch(status, type, chunks, seen = {}) {
  return async (url, init) => {
    Object.assign(seen, { url, init });
    const body = new ReadableStream({
      async pull(c) {
        if (init.signal?.aborted) return c.error(Object.assign(new Error("aborted"), { name: "AbortError" }));
        const next = chunks.shift();
        if (next === undefined) return c.close();
        await new Promise((r) => setTimeout(r, 1));
        c.enqueue(next);
      },
    });
    return new Response(body, { status, headers: { "content-type": type, "request-id": "req_test" } });
  };
}

test("streamMessage: UTF-8 split inside a character, key header, request id", async () => {
  const bytes = new TextEncoder().encode(kStream);
  const at = bytes.indexOf(0xf0) + 2; // inside the 4-byte emoji
  const seen = {};
  let live = "";
  const r = await streamMessage({
    url: "/v1/messages", body: { a: 1 }, apiKey: "k1",
    fetchFn: fakeFetch(200, "text/event-stream", [bytes.slice(0, at), bytes.slice(at)], seen),
    onEvent: (_e, added) => (live += added),
  });
  assert.equal(r.status, 200);
  assert.equal(r.requestId, "req_test");
  assert.equal(r.message.text(), "Héllo wörld 🌊");
  assert.equal(r.message.error, null);
  assert.ok(live.startsWith("Héllo wörld 🌊"));
  assert.equal(seen.init.headers["x-api-key"], "k1");
  assert.equal(seen.init.body, '{"a":1}');
});

test("streamMessage: an HTTP error answer becomes the message's error", async () => {
  const body = JSON.stringify({ type: "error", error: { type: "authentication_error", message: "missing API key", detail: { reason: "missing_api_key" } } });
  const r = await streamMessage({ url: "/v1/messages", body: {}, fetchFn: fakeFetch(401, "application/json", [new TextEncoder().encode(body)]) });
  assert.equal(r.status, 401);
  assert.deepEqual(r.message.error, { type: "authentication_error", message: "missing API key", reason: "missing_api_key" });
});

test("streamMessage: a stream cut before message_stop is an error", async () => {
  const part = kStream.slice(0, kStream.indexOf("event: message_delta"));
  const r = await streamMessage({ url: "/v1/messages", body: {}, fetchFn: fakeFetch(200, "text/event-stream", [new TextEncoder().encode(part)]) });
  assert.equal(r.message.error?.type, "stream_error");
  assert.equal(r.message.text(), "Héllo wörld 🌊");
});

test("streamMessage: abort stops reading and keeps what arrived", async () => {
  const ac = new AbortController();
  const frames = kStream.split(/(?<=\n\n)/).map((f) => new TextEncoder().encode(f));
  const r = await streamMessage({
    url: "/v1/messages", body: {}, signal: ac.signal,
    fetchFn: fakeFetch(200, "text/event-stream", frames),
    onEvent: (_e, added) => { if (added) ac.abort(); },
  });
  assert.ok(r.aborted);
  assert.equal(r.message.error, null);
  assert.equal(r.message.text(), "Héllo ");
});

test("streamMessage: a network failure is an error, not an abort", async () => {
  const r = await streamMessage({ url: "/v1/messages", body: {}, fetchFn: async () => { throw new TypeError("fetch failed"); } });
  assert.equal(r.aborted, false);
  assert.deepEqual(r.message.error, { type: "network_error", message: "fetch failed" });
});
