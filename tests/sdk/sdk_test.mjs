// The official SDKs against a running `zerolayer serve --fake-engine
// --api-key test-key --max-body-bytes 2000000` (run.sh starts it).
// The fake engine writes a fixed story; markers in the prompt ([[fake:long]],
// [[fake:error]]) change its behaviour (src/fake/fake_engine.h).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

const baseURL = process.env.ZL_BASE_URL;
const apiKey = process.env.ZL_API_KEY;
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
    assert.equal(msg.content[0].text, STORY);
    assert.equal(msg.stop_reason, 'end_turn');
    assert.equal(msg.stop_sequence, null);
    assert.ok(msg.usage.input_tokens > 0);
    assert.equal(msg.usage.output_tokens, 26);
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
  assert.equal(final.stop_reason, 'end_turn');
  assert.equal(final.usage.output_tokens, full.usage.output_tokens);
  assert.equal(final.usage.input_tokens, full.usage.input_tokens);
});

test('anthropic: stop sequences and max_tokens', async () => {
  const s = await anthropic.messages.create({ model: 'm', max_tokens: 100, stop_sequences: ['girl'], messages: user('Hi') });
  assert.equal(s.stop_reason, 'stop_sequence');
  assert.equal(s.stop_sequence, 'girl');
  assert.equal(s.content[0].text, 'Once upon a time, there was a little ');
  const streamed = await anthropic.messages.stream({ model: 'm', max_tokens: 100, stop_sequences: ['Lily'], messages: user('Hi') }).finalMessage();
  assert.equal(streamed.stop_reason, 'stop_sequence');
  assert.equal(streamed.stop_sequence, 'Lily');
  const m = await anthropic.messages.create({ model: 'm', max_tokens: 4, messages: user('Hi') });
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.usage.output_tokens, 4);
});

test('anthropic: count_tokens equals usage.input_tokens', async () => {
  const conv = { model: 'm', system: 'You are terse.', messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello' }] }] };
  const count = await anthropic.messages.countTokens(conv);
  const msg = await anthropic.messages.create({ ...conv, max_tokens: 1 });
  assert.equal(count.input_tokens, msg.usage.input_tokens);
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
  await assert.rejects(anthropic.messages.create({ model: 'm', max_tokens: 5, messages: user('x'.repeat(5000)) }), (e) => {
    assert.ok(e instanceof Anthropic.BadRequestError);
    assert.equal(e.error.error.detail.reason, 'context_length_exceeded');
    assert.equal(e.error.error.detail.n_ctx, 4096);
    return true;
  });
  await assert.rejects(anthropic.messages.create({ model: 'm', max_tokens: 5, messages: user('x'.repeat(3_000_000)) }), (e) => {
    assert.equal(e.status, 413);
    assert.equal(e.error.error.type, 'request_too_large');
    return true;
  });
});

test('anthropic: an error after the 200 arrives as an SSE error event', async () => {
  const stream = anthropic.messages.stream({ model: 'm', max_tokens: 100, messages: user('[[fake:error]]') });
  await assert.rejects(stream.finalMessage(), (e) => {
    assert.ok(e instanceof Anthropic.APIError);
    assert.match(String(e.message), /api_error|fake engine failure/);
    return true;
  });
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
    jobs.push(anthropic.messages.stream({ model: 'm', max_tokens: 100, messages: user(`Hi ${i}`) }).finalText());
    jobs.push((async () => {
      const s = await openai.chat.completions.create({ model: 'm', stream: true, messages: user(`Hi ${i}`) });
      let t = '';
      for await (const chunk of s) t += chunk.choices[0]?.delta?.content ?? '';
      return t;
    })());
  }
  const texts = await Promise.all(jobs);
  for (const t of texts) assert.equal(t, STORY);
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
  assert.deepEqual(usage, full.usage);
  const stop = await openai.chat.completions.create({ model: 'm', stop: ['girl'], messages: user('Hi') });
  assert.equal(stop.choices[0].finish_reason, 'stop');
  assert.equal(stop.choices[0].message.content, 'Once upon a time, there was a little ');
});

test('openai: completions, models, errors', async () => {
  const c = await openai.completions.create({ model: 'm', prompt: 'Once', max_tokens: 3 });
  assert.equal(c.choices[0].text, 'Once upon a');
  const models = await openai.models.list();
  assert.equal(models.data.length, 1);
  const bad = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.chat.completions.create({ model: 'm', messages: user('x') }), OpenAI.AuthenticationError);
  await assert.rejects(openai.chat.completions.create({ model: 'm', messages: user('x'.repeat(5000)) }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.code, 'context_length_exceeded');
    return true;
  });
  await assert.rejects(openai.chat.completions.create({ model: 'm', messages: [] }), OpenAI.BadRequestError);
});
