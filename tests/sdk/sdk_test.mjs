// The official SDKs against a running `zerolayer serve --api-key test-key
// --max-body-bytes 2000000 --sse-ping-interval 0.05` (run.sh starts it), on
// the fake engine (zerolayer_test_server serve --fake-engine) or, with ZL_REAL=1, the real engine on stories260K.
// The fake engine writes a fixed story; markers in the prompt ([[fake:long]],
// [[fake:error]], [[fake:prefill=MS]], [[fake:tool=NAME:ARGS]]) change its
// behaviour (tests/support/fake_engine.h). On the real
// model, expected texts come from greedy (temperature 0) answers instead.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

const baseURL = process.env.ZL_BASE_URL;
const apiKey = process.env.ZL_API_KEY;
const REAL = process.env.ZL_REAL === '1';
const N_CTX = Number(process.env.ZL_N_CTX ?? 4096);
const STORY = 'Once upon a time, there was a little girl named Lily. She loved to play outside. "Hi!" she said.\nThe end.';

const anthropic = new Anthropic({ baseURL, apiKey, maxRetries: 0 });
const anthropicBearer = new Anthropic({ baseURL, authToken: apiKey, apiKey: null, maxRetries: 0 });
const openai = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0 });

const user = (text) => [{ role: 'user', content: text }];

async function metric(name) {
  const body = await (await fetch(`${baseURL}/metrics`)).text();
  const m = body.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

test('anthropic: messages.create, with x-api-key and with Bearer', async () => {
  for (const client of [anthropic, anthropicBearer]) {
    const msg = await client.messages.create({ model: 'claude-test', max_tokens: 100, messages: user('Hi') });
    assert.equal(msg.type, 'message');
    assert.equal(msg.role, 'assistant');
    assert.equal(msg.content[0].type, 'text');
    if (REAL) {
      assert.ok(msg.content[0].text.length > 0);
      assert.ok(['end_turn', 'max_tokens'].includes(msg.stop_reason));
      assert.ok(msg.usage.output_tokens > 0 && msg.usage.output_tokens <= 100);
    } else {
      assert.equal(msg.content[0].text, STORY);
      assert.equal(msg.stop_reason, 'end_turn');
      assert.equal(msg.usage.output_tokens, 26);
    }
    assert.equal(msg.stop_sequence, null);
    assert.ok(msg.usage.input_tokens > 0);
    assert.match(msg._request_id, /^req_/);
  }
});

test('anthropic: messages.stream text events and finalMessage equal the non-streaming answer', async () => {
  const params = { model: 'm', max_tokens: 100, temperature: 0, system: [{ type: 'text', text: 'sys' }], messages: user('Hi') };
  const full = await anthropic.messages.create(params);
  const stream = anthropic.messages.stream(params);
  let text = '';
  stream.on('text', (delta) => { text += delta; });
  const final = await stream.finalMessage();
  assert.equal(text, full.content[0].text);
  assert.equal(final.content[0].text, full.content[0].text);
  assert.equal(final.stop_reason, full.stop_reason);
  assert.equal(final.usage.output_tokens, full.usage.output_tokens);
  // The second request may find the prompt's first blocks in the prefix cache.
  const prompt = (u) => u.input_tokens + (u.cache_read_input_tokens ?? 0);
  assert.equal(prompt(final.usage), prompt(full.usage));
});

// A stop string from the middle of the greedy answer to user('Hi'), and the text before it.
async function greedyStop() {
  if (!REAL) return { stop: 'girl', before: 'Once upon a time, there was a little ', stop2: 'Lily' };
  const base = (await anthropic.messages.create({ model: 'm', max_tokens: 48, temperature: 0, messages: user('Hi') })).content[0].text;
  assert.ok(base.length >= 20, base);
  const stop = base.slice(Math.floor(base.length / 2), Math.floor(base.length / 2) + 4);
  return { stop, before: base.slice(0, base.indexOf(stop)), stop2: stop };
}

test('anthropic: stop sequences and max_tokens', async () => {
  const { stop, before, stop2 } = await greedyStop();
  const s = await anthropic.messages.create({ model: 'm', max_tokens: 100, temperature: 0, stop_sequences: [stop], messages: user('Hi') });
  assert.equal(s.stop_reason, 'stop_sequence');
  assert.equal(s.stop_sequence, stop);
  assert.equal(s.content[0].text, before);
  const streamed = await anthropic.messages.stream({ model: 'm', max_tokens: 100, temperature: 0, stop_sequences: [stop2], messages: user('Hi') }).finalMessage();
  assert.equal(streamed.stop_reason, 'stop_sequence');
  assert.equal(streamed.stop_sequence, stop2);
  const m = await anthropic.messages.create({ model: 'm', max_tokens: 4, messages: user('Hi') });
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.usage.output_tokens, 4);
});

test('anthropic: count_tokens equals usage.input_tokens', async () => {
  const conv = { model: 'm', system: 'You are terse.', messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello' }] }] };
  const count = await anthropic.messages.countTokens(conv);
  // A tenant of its own (metadata.user_id salts the prefix cache): nothing is cached.
  const msg = await anthropic.messages.create({ ...conv, max_tokens: 1, metadata: { user_id: `count-${Date.now()}` } });
  assert.equal(count.input_tokens, msg.usage.input_tokens);
  assert.equal(msg.usage.cache_read_input_tokens ?? 0, 0);
});

// Context editing through the SDK's beta surface: the request as Claude Code
// sends it, the report on the message and on the stream's final message
// (BetaMessageStream takes it from message_delta), and count_tokens.
test('anthropic: context editing via beta.messages (applied_edits, finalMessage, countTokens)', { skip: REAL && 'sized for the fake engine window' }, async () => {
  const messages = [{ role: 'user', content: 'Find the ball.' }];
  for (let i = 0; i < 22; i++) {
    messages.push({ role: 'assistant', content: [{ type: 'thinking', thinking: `Box ${i} next.`, signature: 'c2ln' },
      { type: 'tool_use', id: `toolu_${i}`, name: 'look', input: { place: `box ${i}` } }] });
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_${i}`, content: `Nothing in box ${i}. `.repeat(12) }] });
  }
  const tools = [{ name: 'look', description: 'Look in a place.', input_schema: { type: 'object', properties: { place: { type: 'string' } } } }];
  const context_management = { edits: [
    { type: 'clear_thinking_20251015', keep: { type: 'thinking_turns', value: 1 } },
    { type: 'clear_tool_uses_20250919', trigger: { type: 'input_tokens', value: 2000 }, keep: { type: 'tool_uses', value: 3 } }] };
  const betas = ['context-management-2025-06-27'];
  const plain = await anthropic.beta.messages.countTokens({ model: 'm', tools, messages, betas });
  const count = await anthropic.beta.messages.countTokens({ model: 'm', tools, messages, context_management, betas });
  assert.equal(count.context_management.original_input_tokens, plain.input_tokens);
  assert.ok(count.input_tokens < plain.input_tokens - 19 * 100, `${count.input_tokens} vs ${plain.input_tokens}`);
  const params = { model: 'm', max_tokens: 20, tools, messages, context_management, betas, metadata: { user_id: `edits-${Date.now()}` } };
  const msg = await anthropic.beta.messages.create(params);
  const [thinking, uses] = msg.context_management.applied_edits;
  assert.equal(thinking.type, 'clear_thinking_20251015');
  assert.equal(thinking.cleared_thinking_turns, 21);
  assert.equal(uses.type, 'clear_tool_uses_20250919');
  assert.equal(uses.cleared_tool_uses, 19);
  assert.equal(thinking.cleared_input_tokens + uses.cleared_input_tokens, plain.input_tokens - count.input_tokens);
  assert.equal(msg.usage.input_tokens + (msg.usage.cache_read_input_tokens ?? 0), count.input_tokens);
  const final = await anthropic.beta.messages.stream(params).finalMessage();
  assert.deepEqual(final.context_management, msg.context_management);
  // A malformed edit: the SDK's BadRequestError, naming the field.
  await assert.rejects(anthropic.beta.messages.create({ ...params, context_management: { edits: [{ type: 'clear_tool_uses_20250919', keep: { type: 'tool_uses', value: -1 } }] } }),
    (e) => e instanceof Anthropic.BadRequestError && /context_management\.edits\[0\]\.keep\.value/.test(e.message));
});

test('anthropic: models list and retrieve', async () => {
  const page = await anthropic.models.list();
  assert.equal(page.data.length, 1);
  const id = page.data[0].id;
  const model = await anthropic.models.retrieve(id);
  assert.equal(model.id, id);
  await assert.rejects(anthropic.models.retrieve('no-such-model'), Anthropic.NotFoundError);
});

test('anthropic: error classes (401, 400, 404, 413)', async () => {
  const bad = new Anthropic({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.messages.create({ model: 'm', max_tokens: 5, messages: user('x') }), (e) => {
    assert.ok(e instanceof Anthropic.AuthenticationError);
    assert.equal(e.error.error.type, 'authentication_error');
    return true;
  });
  await assert.rejects(anthropic.messages.create({ model: 'm', max_tokens: 0, messages: user('x') }), (e) => {
    assert.ok(e instanceof Anthropic.BadRequestError);
    assert.equal(e.error.error.type, 'invalid_request_error');
    assert.match(e.message, /max_tokens/);
    assert.match(e.requestID, /^req_/);
    return true;
  });
  await assert.rejects(anthropic.messages.create({ model: 'm', max_tokens: 5, messages: user('x '.repeat(5000)) }), (e) => {
    assert.ok(e instanceof Anthropic.BadRequestError);
    assert.equal(e.error.error.detail.reason, 'context_length_exceeded');
    assert.equal(e.error.error.detail.n_ctx, N_CTX);
    return true;
  });
  await assert.rejects(anthropic.messages.create({ model: 'm', max_tokens: 5, messages: user('x'.repeat(3_000_000)) }), (e) => {
    assert.equal(e.status, 413);
    assert.equal(e.error.error.type, 'request_too_large');
    return true;
  });
});

test('anthropic: an error after the 200 arrives as an SSE error event', { skip: REAL && 'needs the fake engine' }, async () => {
  const stream = anthropic.messages.stream({ model: 'm', max_tokens: 100, messages: user('[[fake:error]]') });
  await assert.rejects(stream.finalMessage(), (e) => {
    assert.ok(e instanceof Anthropic.APIError);
    assert.match(String(e.message), /api_error|fake engine failure/);
    return true;
  });
});

// The raw SSE body of a streaming request, as the wire carries it.
async function rawStream(path, body) {
  const res = await fetch(`${baseURL}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    body: JSON.stringify({ ...body, stream: true }),
  });
  assert.equal(res.status, 200);
  return res.text();
}

const count = (text, re) => (text.match(re) ?? []).length;

// [[fake:prefill=400]]: the first token comes 400 ms after submission, so
// the server (a 50 ms interval) starts the stream early and pings.
const SLOW = '[[fake:prefill=400]] Hi';

test('anthropic: pings before the first token (a long prefill) change nothing for messages.stream', { skip: REAL && 'needs the fake engine' }, async () => {
  const raw = await rawStream('/v1/messages', { model: 'm', max_tokens: 100, messages: user(SLOW) });
  const head = raw.slice(0, raw.indexOf('event: content_block_delta'));
  assert.match(head, /^event: message_start\n/);
  assert.ok(count(head, /^event: ping$/gm) >= 2, raw);  // the stream start's own + keep-alives

  const full = await anthropic.messages.create({ model: 'm', max_tokens: 100, messages: user(SLOW) });
  const quick = await anthropic.messages.stream({ model: 'm', max_tokens: 100, messages: user('Hi') }).finalText();
  const stream = anthropic.messages.stream({ model: 'm', max_tokens: 100, messages: user(SLOW) });
  let startUsage = null;
  let text = '';
  // A copy: the SDK's snapshot (and its usage object) is updated in place.
  stream.on('streamEvent', (e) => { if (e.type === 'message_start') startUsage = { ...e.message.usage }; });
  stream.on('text', (delta) => { text += delta; });
  const final = await stream.finalMessage();
  assert.equal(text, quick);
  assert.equal(text, STORY);
  assert.equal(final.content[0].text, STORY);
  assert.equal(final.stop_reason, 'end_turn');
  // The early message_start counts the prompt (nothing generated yet)...
  assert.equal(startUsage.input_tokens, full.usage.input_tokens);
  assert.equal(startUsage.output_tokens, 0);
  // ...and finalMessage() ends with the engine's figures from message_delta.
  for (const k of ['input_tokens', 'output_tokens', 'cache_read_input_tokens', 'cache_creation_input_tokens']) {
    assert.equal(final.usage[k], full.usage[k], k);
  }
});

test('anthropic: an engine error after an early start rejects the stream with the error type', { skip: REAL && 'needs the fake engine' }, async () => {
  const raw = await rawStream('/v1/messages', { model: 'm', max_tokens: 10, messages: user('[[fake:prefill=400]][[fake:overload]]') });
  assert.ok(count(raw, /^event: ping$/gm) >= 2, raw);
  const stream = anthropic.messages.stream({ model: 'm', max_tokens: 10, messages: user('[[fake:prefill=400]][[fake:overload]]') });
  await assert.rejects(stream.finalMessage(), (e) => {
    assert.ok(e instanceof Anthropic.APIError);
    assert.equal(e.error?.error?.type, 'overloaded_error');
    return true;
  });
});

test('openai: streams with : ping comments before the first token', { skip: REAL && 'needs the fake engine' }, async () => {
  const raw = await rawStream('/v1/chat/completions', { model: 'm', messages: user(SLOW) });
  assert.ok(count(raw, /^: ping$/gm) >= 2, raw);
  const s = await openai.chat.completions.create({ model: 'm', stream: true, stream_options: { include_usage: true }, messages: user(SLOW) });
  let text = '';
  let usage = null;
  for await (const chunk of s) {
    if (chunk.choices.length) text += chunk.choices[0].delta?.content ?? '';
    else usage = chunk.usage;
  }
  assert.equal(text, STORY);
  assert.equal(usage.completion_tokens, 26);
  const rawC = await rawStream('/v1/completions', { model: 'm', prompt: '[[fake:prefill=400]]', max_tokens: 3 });
  assert.match(rawC, /^: ping\n\n/);  // no start chunk: the first bytes are a ping
  const c = await openai.completions.create({ model: 'm', prompt: '[[fake:prefill=400]]', max_tokens: 3, stream: true });
  let ctext = '';
  for await (const chunk of c) ctext += chunk.choices[0]?.text ?? '';
  assert.equal(ctext, 'Once upon a');
});

test('anthropic: an aborted stream stops generation', async () => {
  const stream = anthropic.messages.stream({ model: 'm', max_tokens: 100000, messages: user('[[fake:long]]') });
  let n = 0;
  await new Promise((resolve) => {
    stream.on('text', () => { if (++n === 5) { stream.abort(); resolve(); } });
    stream.on('error', resolve);
    stream.on('abort', resolve);
  });
  await stream.done().catch(() => {});
  let running = NaN;
  for (let i = 0; i < 100; i++) {
    running = await metric('engine_requests_running');
    if (running === 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(running, 0);
});

test('anthropic + openai: concurrent streams', async () => {
  const jobs = [];
  for (let i = 0; i < 16; i++) {
    jobs.push(anthropic.messages.stream({ model: 'm', max_tokens: 100, temperature: 0, messages: user(`Hi ${i}`) }).finalText());
    jobs.push((async () => {
      const s = await openai.chat.completions.create({ model: 'm', max_tokens: 100, temperature: 0, stream: true, messages: user(`Hi ${i}`) });
      let t = '';
      for await (const chunk of s) t += chunk.choices[0]?.delta?.content ?? '';
      return t;
    })());
  }
  const texts = await Promise.all(jobs);
  for (let i = 0; i < texts.length; i += 2) {
    // The same greedy prompt through either API gives the same text.
    assert.equal(texts[i], texts[i + 1]);
    if (REAL) assert.ok(texts[i].length > 0); else assert.equal(texts[i], STORY);
  }
});

test('openai: chat completions, streaming and not, with include_usage', async () => {
  const full = await openai.chat.completions.create({ model: 'gpt-4o', max_tokens: 6, temperature: 0, messages: [{ role: 'system', content: 's' }, ...user('Hi')] });
  assert.equal(full.object, 'chat.completion');
  assert.equal(full.choices[0].finish_reason, 'length');
  assert.equal(full.usage.completion_tokens, 6);
  const stream = await openai.chat.completions.create({ model: 'gpt-4o', max_tokens: 6, temperature: 0, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'system', content: 's' }, ...user('Hi')] });
  let text = '';
  let finish = null;
  let usage = null;
  const ids = new Set();
  for await (const chunk of stream) {
    ids.add(chunk.id);
    if (chunk.choices.length) {
      text += chunk.choices[0].delta.content ?? '';
      finish = chunk.choices[0].finish_reason ?? finish;
    } else {
      usage = chunk.usage;
    }
  }
  assert.equal(ids.size, 1);
  assert.equal(text, full.choices[0].message.content);
  assert.equal(finish, 'length');
  // prompt_tokens_details.cached_tokens may differ: the second request hits the prefix cache.
  for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens']) assert.equal(usage[k], full.usage[k]);
  const { stop: s, before } = await greedyStop();
  const stop = await openai.chat.completions.create({ model: 'm', temperature: 0, stop: [s], messages: user('Hi') });
  assert.equal(stop.choices[0].finish_reason, 'stop');
  assert.equal(stop.choices[0].message.content, before);
});

test('openai: completions, models, errors', async () => {
  const c = await openai.completions.create({ model: 'm', prompt: 'Once', max_tokens: 3 });
  if (REAL) {
    assert.ok(c.choices[0].text.length > 0);
    assert.equal(c.usage.completion_tokens, 3);
  } else {
    assert.equal(c.choices[0].text, 'Once upon a');
  }
  const models = await openai.models.list();
  assert.equal(models.data.length, 1);
  const bad = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.chat.completions.create({ model: 'm', messages: user('x') }), OpenAI.AuthenticationError);
  await assert.rejects(openai.chat.completions.create({ model: 'm', messages: user('x '.repeat(5000)) }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.code, 'context_length_exceeded');
    return true;
  });
  await assert.rejects(openai.chat.completions.create({ model: 'm', messages: [] }), OpenAI.BadRequestError);
});

// ---- tool calls (the fake engine writes a ChatML model's <tool_call>; the
// fake codec has the Hermes syntax) ----

const WEATHER = { name: 'get_weather', description: 'The weather now', input_schema: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] } };
const CALL = '[[fake:tool=get_weather:{"location": "Paris", "days": [1, 2]}]]';
const INPUT = { location: 'Paris', days: [1, 2] };
const FAKE_ONLY = { skip: REAL && 'needs the fake engine (stories260K has no tool syntax)' };

function checkToolUse(msg) {
  assert.equal(msg.stop_reason, 'tool_use');
  assert.deepEqual(msg.content.map((b) => b.type), ['text', 'tool_use']);
  assert.equal(msg.content[0].text, 'Let me check.');
  const use = msg.content[1];
  assert.match(use.id, /^toolu_[0-9A-Za-z]{24}$/);
  assert.equal(use.name, 'get_weather');
  assert.deepEqual(use.input, INPUT);
  return use;
}

test('anthropic: tools -> a tool_use block, create and stream().finalMessage(), then the tool_result round', FAKE_ONLY, async () => {
  const params = { model: 'm', max_tokens: 200, tools: [WEATHER], messages: user(`Weather in Paris? ${CALL}`) };
  const use = checkToolUse(await anthropic.messages.create(params));
  const stream = anthropic.messages.stream(params);
  const jsonDeltas = [];
  stream.on('inputJson', (partial) => { jsonDeltas.push(partial); });
  const streamed = checkToolUse(await stream.finalMessage());
  assert.deepEqual(JSON.parse(jsonDeltas.join('')), INPUT);
  assert.notEqual(streamed.id, use.id);

  // The agent's second round: the call and its result go back; the model answers in text.
  const follow = await anthropic.messages.create({
    ...params,
    messages: [...params.messages, { role: 'assistant', content: [{ type: 'text', text: 'Let me check.' }, use] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'Sunny, 21 C' }] }],
  });
  assert.equal(follow.stop_reason, 'end_turn');
  assert.equal(follow.content[0].type, 'text');
  assert.equal(follow.content[0].text, STORY);
  const count = await anthropic.messages.countTokens({ model: 'm', tools: params.tools, messages: [...params.messages,
    { role: 'assistant', content: [{ type: 'text', text: 'Let me check.' }, use] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'Sunny, 21 C' }] }] });
  assert.equal(count.input_tokens, follow.usage.input_tokens);
});

test('anthropic: tool_choice names the tool; none turns tools off', FAKE_ONLY, async () => {
  const forced = await anthropic.messages.stream({ model: 'm', max_tokens: 200, tools: [WEATHER], tool_choice: { type: 'tool', name: 'get_weather' }, messages: user(`Paris ${CALL}`) }).finalMessage();
  assert.equal(forced.stop_reason, 'tool_use');
  assert.deepEqual(forced.content.map((b) => b.type), ['tool_use']);
  assert.deepEqual(forced.content[0].input, INPUT);
  const none = await anthropic.messages.create({ model: 'm', max_tokens: 200, tools: [WEATHER], tool_choice: { type: 'none' }, messages: user(`Paris ${CALL}`) });
  assert.equal(none.stop_reason, 'end_turn');
  assert.deepEqual(none.content.map((b) => b.type), ['text']);
  assert.match(none.content[0].text, /<tool_call>/);
});

const OPENAI_TOOLS = [{ type: 'function', function: { name: 'get_weather', description: 'The weather now', parameters: WEATHER.input_schema } }];

test('openai: tools -> message.tool_calls, create and streamed', FAKE_ONLY, async () => {
  const params = { model: 'gpt-4o', max_tokens: 200, tools: OPENAI_TOOLS, messages: user(`Weather in Paris? ${CALL}`) };
  const full = await openai.chat.completions.create(params);
  const choice = full.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.content, 'Let me check.');
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.match(call.id, /^call_[0-9A-Za-z]{24}$/);
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.function.arguments), INPUT);

  // Streaming: the deltas accumulate to the same message, by hand and by the SDK's helper.
  const s = await openai.chat.completions.create({ ...params, stream: true });
  let content = '';
  let finish = null;
  const calls = [];
  for await (const chunk of s) {
    const delta = chunk.choices[0]?.delta ?? {};
    content += delta.content ?? '';
    for (const tc of delta.tool_calls ?? []) {
      calls[tc.index] ??= { id: '', name: '', arguments: '' };
      if (tc.id) calls[tc.index].id = tc.id;
      if (tc.function?.name) calls[tc.index].name += tc.function.name;
      calls[tc.index].arguments += tc.function?.arguments ?? '';
    }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(content, 'Let me check.');
  assert.equal(finish, 'tool_calls');
  assert.equal(calls.length, 1);
  assert.match(calls[0].id, /^call_/);
  assert.equal(calls[0].name, 'get_weather');
  assert.deepEqual(JSON.parse(calls[0].arguments), INPUT);
  const final = await openai.chat.completions.stream(params).finalChatCompletion();
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.deepEqual(JSON.parse(final.choices[0].message.tool_calls[0].function.arguments), INPUT);

  // The tool result goes back as a role "tool" message.
  const follow = await openai.chat.completions.create({ ...params, messages: [...params.messages, choice.message,
    { role: 'tool', tool_call_id: call.id, content: 'Sunny, 21 C' }] });
  assert.equal(follow.choices[0].finish_reason, 'stop');
  assert.equal(follow.choices[0].message.content, STORY);
});

test('tools on a model without a tool syntax are accepted and answered in text', { skip: !REAL && 'the real model only' }, async () => {
  const msg = await anthropic.messages.create({ model: 'm', max_tokens: 8, temperature: 0, tools: [WEATHER], messages: user('Hi') });
  assert.deepEqual(msg.content.map((b) => b.type), ['text']);
  assert.ok(['end_turn', 'max_tokens'].includes(msg.stop_reason));
  const chat = await openai.chat.completions.create({ model: 'm', max_tokens: 8, temperature: 0, tools: OPENAI_TOOLS, messages: user('Hi') });
  assert.equal(chat.choices[0].message.tool_calls, undefined);
});

const TIME = { name: 'get_time', description: 'The time now', input_schema: { type: 'object', properties: { tz: { type: 'string' } } } };
const TWO_CALLS = '[[fake:tool=get_weather:{"location": "Paris", "days": [1, 2]}]][[fake:tool=get_time:{"tz": "CET"}]]';
const OPENAI_TWO_TOOLS = [...OPENAI_TOOLS, { type: 'function', function: { name: 'get_time', description: 'The time now', parameters: TIME.input_schema } }];
const blockNames = (msg) => msg.content.map((b) => (b.type === 'tool_use' ? b.name : b.type));

test('anthropic: parallel tool calls, and one with disable_parallel_tool_use', FAKE_ONLY, async () => {
  const params = { model: 'm', max_tokens: 200, tools: [WEATHER, TIME], messages: user(`Weather and time? ${TWO_CALLS}`) };
  const both = await anthropic.messages.stream(params).finalMessage();
  assert.deepEqual(blockNames(both), ['text', 'get_weather', 'get_time']);
  assert.deepEqual(both.content[1].input, INPUT);
  assert.deepEqual(both.content[2].input, { tz: 'CET' });
  assert.equal(both.stop_reason, 'tool_use');
  const single = { ...params, tool_choice: { type: 'auto', disable_parallel_tool_use: true } };
  for (const one of [await anthropic.messages.create(single), await anthropic.messages.stream(single).finalMessage()]) {
    assert.deepEqual(blockNames(one), ['text', 'get_weather']);
    assert.deepEqual(one.content[1].input, INPUT);
    assert.equal(one.stop_reason, 'tool_use');
    assert.ok(one.usage.output_tokens > 0 && one.usage.output_tokens < both.usage.output_tokens, JSON.stringify(one.usage));
  }
  await assert.rejects(anthropic.messages.create({ ...params, tool_choice: { type: 'auto', disable_parallel_tool_use: 'yes' } }), (e) => {
    assert.ok(e instanceof Anthropic.BadRequestError);
    assert.match(e.message, /tool_choice\.disable_parallel_tool_use/);
    return true;
  });
});

test('openai: parallel tool calls, and one with parallel_tool_calls: false', FAKE_ONLY, async () => {
  const params = { model: 'gpt-4o', max_tokens: 200, tools: OPENAI_TWO_TOOLS, messages: user(`Weather and time? ${TWO_CALLS}`) };
  const both = await openai.chat.completions.stream(params).finalChatCompletion();
  const calls = both.choices[0].message.tool_calls;
  assert.deepEqual(calls.map((c) => c.function.name), ['get_weather', 'get_time']);
  assert.deepEqual(JSON.parse(calls[1].function.arguments), { tz: 'CET' });
  assert.notEqual(calls[0].id, calls[1].id);
  const single = { ...params, parallel_tool_calls: false };
  for (const one of [await openai.chat.completions.create(single), await openai.chat.completions.stream(single).finalChatCompletion()]) {
    assert.equal(one.choices[0].finish_reason, 'tool_calls');
    assert.equal(one.choices[0].message.content, 'Let me check.');
    assert.deepEqual(one.choices[0].message.tool_calls.map((c) => c.function.name), ['get_weather']);
    assert.deepEqual(JSON.parse(one.choices[0].message.tool_calls[0].function.arguments), INPUT);
  }
  await assert.rejects(openai.chat.completions.create({ ...params, parallel_tool_calls: 'no' }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.param, 'parallel_tool_calls');
    return true;
  });
});

// ---- streamed tool-call arguments: the fake model writes 3 bytes a token,
// so a call's arguments arrive in many pieces ----

const LONG_INPUT = { location: 'Paris, the capital of France', days: [1, 2, 3], units: { temp: 'C', wind: 'km/h' }, note: 'caf\u00e9 "quoted" \\ done' };
const LONG_CALL = `[[fake:tool=get_weather:${JSON.stringify(LONG_INPUT).replace(/\]\]/g, '')}]]`;

test('anthropic: tool arguments stream in pieces; stream().finalMessage() equals create()', FAKE_ONLY, async () => {
  const params = { model: 'm', max_tokens: 400, tools: [WEATHER], messages: user(`Weather? ${LONG_CALL}`) };
  const raw = await rawStream('/v1/messages', params);
  const pieces = [...raw.matchAll(/^data: (.*"input_json_delta".*)$/gm)].map((m) => JSON.parse(m[1]).delta.partial_json);
  assert.ok(pieces.length >= 10, `${pieces.length} pieces`);
  assert.deepEqual(JSON.parse(pieces.join('')), LONG_INPUT);
  // Each piece leaves a valid JSON prefix: the block opened with input {} and the SDK's partial parse never fails.
  const stream = anthropic.messages.stream(params);
  const snapshots = [];
  stream.on('inputJson', (partial, snapshot) => { snapshots.push(snapshot); });
  const streamed = await stream.finalMessage();
  const full = await anthropic.messages.create(params);
  assert.ok(snapshots.length >= 10, `${snapshots.length} inputJson events`);
  assert.deepEqual(snapshots.at(-1), LONG_INPUT);
  assert.deepEqual(streamed.content.map((b) => b.type), ['text', 'tool_use']);
  assert.deepEqual(streamed.content[1].input, LONG_INPUT);
  assert.deepEqual(streamed.content[1].input, full.content[1].input);
  assert.equal(streamed.content[1].name, full.content[1].name);
  assert.equal(streamed.stop_reason, 'tool_use');
  assert.equal(streamed.usage.output_tokens, full.usage.output_tokens);
});

test('openai: tool arguments stream in pieces; the streamed accumulation equals create()', FAKE_ONLY, async () => {
  const params = { model: 'gpt-4o', max_tokens: 400, tools: OPENAI_TOOLS, messages: user(`Weather? ${LONG_CALL}`) };
  const full = await openai.chat.completions.create(params);
  const fullArgs = full.choices[0].message.tool_calls[0].function.arguments;
  assert.deepEqual(JSON.parse(fullArgs), LONG_INPUT);
  const s = await openai.chat.completions.create({ ...params, stream: true });
  let args = '';
  let nPieces = 0;
  let head = null;
  for await (const chunk of s) {
    for (const tc of chunk.choices[0]?.delta?.tool_calls ?? []) {
      assert.equal(tc.index, 0);
      if (tc.id) head = tc;
      if (tc.function?.arguments) nPieces++;
      args += tc.function?.arguments ?? '';
    }
  }
  assert.equal(head.function.name, 'get_weather');
  assert.equal(head.function.arguments, '');
  assert.ok(nPieces >= 10, `${nPieces} pieces`);
  assert.equal(args, fullArgs);  // the same JSON text, byte for byte
  const final = await openai.chat.completions.stream(params).finalChatCompletion();
  assert.equal(final.choices[0].message.tool_calls[0].function.arguments, fullArgs);
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
});

test('anthropic + openai: a streamed call that breaks off rejects the stream; not streamed it is text', FAKE_ONLY, async () => {
  const BROKEN = '[[fake:tool=get_weather:{"location": "Paris",, "x": 1}]]';
  const stream = anthropic.messages.stream({ model: 'm', max_tokens: 200, tools: [WEATHER], messages: user(`Weather? ${BROKEN}`) });
  await assert.rejects(stream.finalMessage(), (e) => {
    assert.ok(e instanceof Anthropic.APIError);
    assert.equal(e.error?.error?.type, 'api_error');
    assert.equal(e.error?.error?.detail?.reason, 'invalid_tool_call');
    return true;
  });
  const s = await openai.chat.completions.create({ model: 'gpt-4o', max_tokens: 200, stream: true, tools: OPENAI_TOOLS, messages: user(`Weather? ${BROKEN}`) });
  await assert.rejects((async () => { for await (const _ of s) { /* drain */ } })(), (e) => {
    assert.ok(e instanceof OpenAI.APIError);
    return true;
  });
  const text = await anthropic.messages.create({ model: 'm', max_tokens: 200, tools: [WEATHER], messages: user(`Weather? ${BROKEN}`) });
  assert.equal(text.stop_reason, 'end_turn');
  assert.deepEqual(text.content.map((b) => b.type), ['text']);
});

// ---- logprobs (scored by the real engine on stories260K; the fake engine has no logits) ----

const REAL_ONLY = { skip: !REAL && 'the real model only (the fake engine has no logits)' };

function checkChatEntry(e, nTop) {
  assert.equal(typeof e.token, 'string');
  assert.ok(e.logprob <= 0, String(e.logprob));
  assert.ok(Array.isArray(e.bytes));
  if (!e.token.includes('\uFFFD')) assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
  assert.equal(e.top_logprobs.length, nTop);
  for (let i = 1; i < nTop; i++) assert.ok(e.top_logprobs[i - 1].logprob >= e.top_logprobs[i].logprob);
  // Greedy: the chosen token is the most likely one.
  if (nTop > 0) {
    assert.equal(e.top_logprobs[0].token, e.token);
    assert.equal(e.top_logprobs[0].logprob, e.logprob);
  }
}

test('openai: chat logprobs, streamed and not: the same entries for a greedy request', REAL_ONLY, async () => {
  const req = { model: 'm', max_tokens: 12, temperature: 0, logprobs: true, top_logprobs: 3, messages: user('Hi') };
  const full = await openai.chat.completions.create(req);
  const lp = full.choices[0].logprobs;
  assert.equal(lp.refusal, null);
  assert.equal(lp.content.length, full.usage.completion_tokens);  // cut by max_tokens: every token is text
  for (const e of lp.content) checkChatEntry(e, 3);
  assert.equal(Buffer.concat(lp.content.map((e) => Buffer.from(e.bytes))).toString('utf8'), full.choices[0].message.content);
  const stream = await openai.chat.completions.create({ ...req, stream: true });
  const streamed = [];
  let text = '';
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    text += c.delta?.content ?? '';
    if (c.logprobs) streamed.push(...c.logprobs.content);
  }
  assert.equal(text, full.choices[0].message.content);
  // The same tokens; values to float rounding (the second request may find its prompt cached).
  const near = (a, b) => assert.ok(Math.abs(a - b) < 1e-4, `${a} vs ${b}`);
  assert.equal(streamed.length, lp.content.length);
  streamed.forEach((e, i) => {
    assert.equal(e.token, lp.content[i].token);
    near(e.logprob, lp.content[i].logprob);
    assert.deepEqual(e.top_logprobs.map((t) => t.token), lp.content[i].top_logprobs.map((t) => t.token));
    e.top_logprobs.forEach((t, j) => near(t.logprob, lp.content[i].top_logprobs[j].logprob));
  });
  // logprobs alone: no alternatives; off: null.
  const bare = await openai.chat.completions.create({ ...req, top_logprobs: undefined });
  assert.deepEqual(bare.choices[0].logprobs.content.map((e) => e.token), lp.content.map((e) => e.token));
  for (const e of bare.choices[0].logprobs.content) assert.deepEqual(e.top_logprobs, []);
  const off = await openai.chat.completions.create({ ...req, logprobs: false, top_logprobs: undefined });
  assert.equal(off.choices[0].logprobs, null);
  // A stop string: the text and the entries stop before it.
  const { stop: s, before } = await greedyStop();
  const stopped = await openai.chat.completions.create({ ...req, max_tokens: 48, stop: [s] });
  assert.equal(stopped.choices[0].message.content, before);
  const bytes = Buffer.concat(stopped.choices[0].logprobs.content.map((e) => Buffer.from(e.bytes))).toString('utf8');
  // The token that holds the stop string's start comes with the text before it; none after.
  assert.ok(bytes.startsWith(before) && bytes.length < before.length + 16, `${JSON.stringify(bytes)} vs ${JSON.stringify(before)}`);
});

test('openai: completions logprobs (the legacy format), streamed and not', REAL_ONLY, async () => {
  const req = { model: 'm', prompt: 'Once upon a time', max_tokens: 8, temperature: 0, logprobs: 2 };
  const c = await openai.completions.create(req);
  const lp = c.choices[0].logprobs;
  assert.equal(lp.tokens.length, 8);
  assert.equal(lp.tokens.join(''), c.choices[0].text);
  assert.equal(lp.token_logprobs.length, 8);
  assert.equal(lp.text_offset[0], 0);
  for (let i = 0; i < 8; i++) {
    const top = lp.top_logprobs[i];
    assert.equal(top[lp.tokens[i]], lp.token_logprobs[i]);  // the chosen token is in it
    assert.ok(Object.keys(top).length >= 1 && Object.keys(top).length <= 3);
    if (i > 0) assert.equal(lp.text_offset[i], lp.text_offset[i - 1] + [...lp.tokens[i - 1]].length);
  }
  const stream = await openai.completions.create({ ...req, stream: true });
  const tokens = [];
  const logprobs = [];
  const offsets = [];
  for await (const chunk of stream) {
    const l = chunk.choices[0]?.logprobs;
    if (!l) continue;
    tokens.push(...l.tokens);
    logprobs.push(...l.token_logprobs);
    offsets.push(...l.text_offset);
  }
  assert.deepEqual(tokens, lp.tokens);
  logprobs.forEach((x, i) => assert.ok(Math.abs(x - lp.token_logprobs[i]) < 1e-4));
  assert.deepEqual(offsets, lp.text_offset);
  const zero = await openai.completions.create({ ...req, logprobs: 0 });
  assert.deepEqual(zero.choices[0].logprobs.tokens, lp.tokens);
  for (const top of zero.choices[0].logprobs.top_logprobs) assert.equal(Object.keys(top).length, 1);
});

test('openai: completions echo: the prompt first, its entries too (the first null); max_tokens 0: the prompt alone', REAL_ONLY, async () => {
  const prompt = 'Once upon a time';
  const req = { model: 'm', prompt, max_tokens: 4, temperature: 0, logprobs: 1, echo: true };
  const c = await openai.completions.create(req);
  const plain = await openai.completions.create({ ...req, echo: false });
  assert.equal(c.choices[0].text, prompt + plain.choices[0].text);
  const lp = c.choices[0].logprobs;
  const n = c.usage.prompt_tokens;
  assert.equal(lp.tokens.length, n + 4);
  assert.equal(lp.token_logprobs[0], null);
  assert.equal(lp.top_logprobs[0], null);
  for (let i = 1; i < n; i++) assert.ok(lp.token_logprobs[i] <= 0);
  assert.deepEqual(lp.tokens.slice(n), plain.choices[0].logprobs.tokens);
  assert.deepEqual(lp.token_logprobs.slice(n), plain.choices[0].logprobs.token_logprobs);
  const stream = await openai.completions.create({ ...req, stream: true });
  let text = '';
  const values = [];
  for await (const chunk of stream) {
    text += chunk.choices[0]?.text ?? '';
    values.push(...(chunk.choices[0]?.logprobs?.token_logprobs ?? []));
  }
  assert.equal(text, c.choices[0].text);
  assert.deepEqual(values, lp.token_logprobs);
  const only = await openai.completions.create({ ...req, max_tokens: 0 });
  assert.equal(only.choices[0].text, prompt);
  assert.equal(only.usage.completion_tokens, 0);
  assert.deepEqual(only.choices[0].logprobs.token_logprobs, lp.token_logprobs.slice(0, n));
});

test("openai: vLLM's min_tokens, ignore_eos and stop_token_ids through the SDK; its unsupported fields are 400s", REAL_ONLY, async () => {
  // stories260K's EOS is id 2: biased to come first, it ends the answer at once unless held back.
  const req = { model: 'm', prompt: 'Once upon a time', max_tokens: 40, temperature: 0, logit_bias: { 2: 100 } };
  const early = await openai.completions.create(req);
  assert.equal(early.choices[0].finish_reason, 'stop');
  assert.equal(early.usage.completion_tokens, 1);
  const held = await openai.completions.create({ ...req, min_tokens: 10 });
  assert.equal(held.choices[0].finish_reason, 'stop');
  assert.equal(held.usage.completion_tokens, 11);
  const ignored = await openai.completions.create({ ...req, ignore_eos: true });
  assert.equal(ignored.choices[0].finish_reason, 'length');
  assert.equal(ignored.usage.completion_tokens, 40);
  const chat = await openai.chat.completions.create({ model: 'm', messages: user('Hi'), max_tokens: 40, temperature: 0,
                                                      logit_bias: { 13: 100 }, stop_token_ids: [13], min_tokens: 3 });
  assert.equal(chat.choices[0].finish_reason, 'stop');
  assert.equal(chat.usage.completion_tokens, 4);
  const bad = async (p, param) => assert.rejects(p, (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.param, param);
    return true;
  });
  await bad(openai.completions.create({ ...req, min_tokens: 41 }), 'min_tokens');
  await bad(openai.completions.create({ ...req, best_of: 3 }), 'best_of');
  await bad(openai.chat.completions.create({ model: 'm', messages: user('Hi'), prompt_logprobs: 2 }), 'prompt_logprobs');
});

test("openai: vLLM's guided_choice and guided_regex constrain the text itself", REAL_ONLY, async () => {
  const choices = ['yes', 'no', 'it "depends"'];
  const picked = await openai.chat.completions.create({ model: 'm', messages: user('Well?'), max_tokens: 20, temperature: 1,
                                                        seed: 3, n: 4, guided_choice: choices });
  for (const c of picked.choices) {
    assert.ok(choices.includes(c.message.content), c.message.content);
    assert.equal(c.finish_reason, 'stop');
  }
  const pattern = '[A-Z][a-z]{2,6} (is|was) \\d{1,3}\\.';
  const re = new RegExp(`^(?:${pattern})$`);
  const matched = await openai.completions.create({ model: 'm', prompt: 'Once upon a time', max_tokens: 30, temperature: 1,
                                                    seed: 5, n: 3, guided_regex: pattern });
  for (const c of matched.choices) assert.ok(re.test(c.text), c.text);
  const streamed = await openai.completions.create({ model: 'm', prompt: 'Once upon a time', max_tokens: 30, temperature: 1,
                                                     seed: 5, guided_regex: pattern, stream: true });
  let text = '';
  for await (const chunk of streamed) text += chunk.choices[0]?.text ?? '';
  assert.equal(text, matched.choices[0].text);
});

test("openai: llama-server's grammar and vLLM's guided_grammar (GBNF) constrain whole and streamed answers", REAL_ONLY, async () => {
  const grammar = 'root ::= ("yes" | "no") " " [0-9]{2,3}';
  const re = /^(yes|no) [0-9]{2,3}$/;
  const chat = { model: 'm', messages: user('Well?'), max_tokens: 20, temperature: 1, seed: 7 };
  const whole = await openai.chat.completions.create({ ...chat, n: 3, grammar });
  assert.equal(whole.choices.length, 3);
  for (const c of whole.choices) {
    assert.match(c.message.content, re);
    assert.equal(c.finish_reason, 'stop');
  }
  const streamed = await openai.chat.completions.create({ ...chat, grammar, stream: true });
  let text = '';
  for await (const chunk of streamed) text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, whole.choices[0].message.content);
  const texts = ['', '', ''];
  for await (const chunk of await openai.chat.completions.create({ ...chat, n: 3, grammar, stream: true })) {
    for (const c of chunk.choices) texts[c.index] += c.delta?.content ?? '';
  }
  for (const t of texts) assert.match(t, re);
  const prompt = { model: 'm', prompt: 'Once upon a time', max_tokens: 20, temperature: 1, seed: 11 };
  const completed = await openai.completions.create({ ...prompt, n: 3, guided_grammar: grammar });
  for (const c of completed.choices) assert.match(c.text, re);
  let streamedText = '';
  for await (const chunk of await openai.completions.create({ ...prompt, guided_grammar: grammar, stream: true })) {
    streamedText += chunk.choices[0]?.text ?? '';
  }
  assert.equal(streamedText, completed.choices[0].text);
  // A grammar that does not compile: a 400 naming the field, with the compiler's position.
  await assert.rejects(openai.completions.create({ ...prompt, grammar: 'root ::= "a" item' }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.param, 'grammar');
    assert.match(e.message, /line 1, column 14: undefined rule 'item'/);
    return true;
  });
});

test("openai: llama-server's json_schema gives JSON with the required keys", REAL_ONLY, async () => {
  const json_schema = { type: 'object', properties: { name: { type: 'string', maxLength: 12 },
                                                        age: { type: 'integer', minimum: 0, maximum: 120 } },
                        required: ['name', 'age'] };
  const r = await openai.chat.completions.create({ model: 'm', messages: user('Who?'), max_tokens: 300, temperature: 1,
                                                   seed: 2, n: 2, json_schema });
  for (const c of r.choices) {
    assert.equal(c.finish_reason, 'stop', c.message.content);
    const v = JSON.parse(c.message.content);
    assert.deepEqual(Object.keys(v), ['name', 'age']);
    assert.equal(typeof v.name, 'string');
    assert.ok(Number.isInteger(v.age) && v.age >= 0 && v.age <= 120, c.message.content);
  }
  const c = await openai.completions.create({ model: 'm', prompt: 'Once upon a time', max_tokens: 300, temperature: 0, json_schema });
  assert.deepEqual(Object.keys(JSON.parse(c.choices[0].text)), ['name', 'age']);
});

test('openai: n choices, whole and streamed: one answer id, each choice a full answer, the prompt counted once', async () => {
  const req = { model: 'm', messages: user('Once upon a time'), max_tokens: 6, temperature: 0 };
  const one = await openai.chat.completions.create(req);
  const three = await openai.chat.completions.create({ ...req, n: 3 });
  assert.equal(three.choices.length, 3);
  three.choices.forEach((c, i) => {
    assert.equal(c.index, i);
    assert.equal(c.message.content, one.choices[0].message.content);
    assert.equal(c.finish_reason, one.choices[0].finish_reason);
  });
  assert.equal(three.usage.prompt_tokens, one.usage.prompt_tokens);
  assert.equal(three.usage.completion_tokens, 3 * one.usage.completion_tokens);
  const stream = await openai.chat.completions.create({ ...req, n: 2, stream: true, stream_options: { include_usage: true } });
  const texts = ['', ''];
  const finish = [];
  const ids = new Set();
  let usage = null;
  for await (const chunk of stream) {
    ids.add(chunk.id);
    for (const c of chunk.choices) {
      texts[c.index] += c.delta.content ?? '';
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(ids.size, 1);
  assert.deepEqual(texts, [one.choices[0].message.content, one.choices[0].message.content]);
  assert.deepEqual(finish, [one.choices[0].finish_reason, one.choices[0].finish_reason]);
  assert.equal(usage.prompt_tokens, one.usage.prompt_tokens);
  assert.equal(usage.completion_tokens, 2 * one.usage.completion_tokens);
});

test('openai: completions with several prompts: n choices each, in prompt order; too many choices is a 400', async () => {
  const prompts = ['Once upon a time', 'The little dog'];
  const base = { model: 'm', max_tokens: 5, temperature: 0 };
  const singles = [];
  for (const prompt of prompts) singles.push(await openai.completions.create({ ...base, prompt }));
  const all = await openai.completions.create({ ...base, prompt: prompts, n: 2 });
  assert.equal(all.choices.length, 4);
  all.choices.forEach((c, i) => {
    assert.equal(c.index, i);
    assert.equal(c.text, singles[Math.floor(i / 2)].choices[0].text);
  });
  assert.equal(all.usage.prompt_tokens, singles[0].usage.prompt_tokens + singles[1].usage.prompt_tokens);
  assert.equal(all.usage.completion_tokens, 2 * (singles[0].usage.completion_tokens + singles[1].usage.completion_tokens));
  const stream = await openai.completions.create({ ...base, prompt: prompts, stream: true });
  const texts = ['', ''];
  for await (const chunk of stream) for (const c of chunk.choices) texts[c.index] += c.text;
  assert.deepEqual(texts, singles.map((s) => s.choices[0].text));
  await assert.rejects(openai.completions.create({ ...base, prompt: prompts, n: 65 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.param, 'prompt');
    return true;
  });
});

test('openai: sampled n choices differ; with a seed the answer repeats', REAL_ONLY, async () => {
  const req = { model: 'm', messages: user('Once upon a time'), max_tokens: 16, temperature: 1, seed: 7, n: 3 };
  const a = await openai.chat.completions.create(req);
  const b = await openai.chat.completions.create(req);
  const texts = a.choices.map((c) => c.message.content);
  assert.deepEqual(b.choices.map((c) => c.message.content), texts);
  assert.ok(new Set(texts).size > 1, texts.join(' | '));
  const ids = await openai.completions.create({ model: 'm', prompt: [[1, 450], [1, 365]], max_tokens: 3, temperature: 0 });
  assert.equal(ids.choices.length, 2);
  assert.equal(ids.usage.prompt_tokens, 4);
});

test('openai: logprobs requests the API refuses', async () => {
  const bad = async (p, param) => assert.rejects(p, (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.param, param);
    return true;
  });
  await bad(openai.chat.completions.create({ model: 'm', top_logprobs: 2, messages: user('Hi') }), 'top_logprobs');
  await bad(openai.chat.completions.create({ model: 'm', logprobs: true, top_logprobs: 21, messages: user('Hi') }), 'top_logprobs');
  await bad(openai.completions.create({ model: 'm', prompt: 'Once', logprobs: 6 }), 'logprobs');
  await bad(openai.completions.create({ model: 'm', prompt: 'Once', max_tokens: 0 }), 'max_tokens');  // (echo takes 0)
});

test('openai: logprobs through tool-call parsing and stream pacing: the stream carries every entry', FAKE_ONLY, async () => {
  // The fake engine's made-up entries: one per token, text tokens and the call's alike.
  const params = { model: 'gpt-4o', max_tokens: 200, tools: OPENAI_TOOLS, logprobs: true, top_logprobs: 2, messages: user(`Weather in Paris? ${CALL}`) };
  const full = await openai.chat.completions.create(params);
  assert.equal(full.choices[0].finish_reason, 'tool_calls');
  const entries = full.choices[0].logprobs.content;
  assert.equal(entries.length, full.usage.completion_tokens);
  assert.equal(entries.map((e) => e.token).join('').startsWith('Let me check.'), true);
  for (const e of entries) assert.deepEqual(e.top_logprobs.map((t) => t.token), [e.token, 'alt1']);
  for (const stream_options of [undefined, { max_buffer_size: 4, min_delay_ms: 1 }]) {
    const s = await openai.chat.completions.create({ ...params, stream: true, ...(stream_options && { stream_options }) });
    const streamed = [];
    let n_chunks = 0;
    for await (const chunk of s) {
      n_chunks++;
      if (chunk.choices[0]?.logprobs) streamed.push(...chunk.choices[0].logprobs.content);
    }
    assert.ok(n_chunks > 3);
    assert.deepEqual(streamed, entries);
  }
});
