// HTTP/2 client checks for tests/e2e/http2_test.cc, on Node's built-in
// http2 module (no npm package). One JSON line on stdout per run.
//
//   node http2_client.mjs stream URL MIN_DELAY_MS      a paced OpenAI stream
//   node http2_client.mjs settings URL                 the server's SETTINGS
//   node http2_client.mjs rapid-reset URL N            N streams opened and cancelled at once
//   node http2_client.mjs slow-reader URL              a stream not read for a while (backpressure)
//   node http2_client.mjs cancel URL                   one stream reset mid-answer
// URL: http://127.0.0.1:PORT or https://…; ZL_CA (a PEM file) is trusted for https.
import http2 from 'node:http2';
import fs from 'node:fs';

const [mode, url, arg] = process.argv.slice(2);
const connectOptions = process.env.ZL_CA ? { ca: fs.readFileSync(process.env.ZL_CA) } : {};

function connect(extra = {}) {
  return http2.connect(url, { ...connectOptions, ...extra });
}

function chatBody(extra) {
  return JSON.stringify({
    model: 'm',
    max_tokens: 40,
    stream: true,
    messages: [{ role: 'user', content: 'Hello' }],
    ...extra,
  });
}

function post(session, path, body) {
  const req = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/json' });
  req.end(body);
  return req;
}

// Whole answer of one request: {status, headers, body}.
function fetchAll(session, method, path, body) {
  return new Promise((resolve, reject) => {
    const req = session.request({ ':method': method, ':path': path, 'content-type': 'application/json' });
    let status = 0;
    let headers = {};
    let data = '';
    req.on('response', (h) => {
      status = h[':status'];
      headers = h;
    });
    req.setEncoding('utf8');
    req.on('data', (c) => (data += c));
    req.on('end', () => resolve({ status, headers, body: data }));
    req.on('error', reject);
    if (body) req.end(body);
    else req.end();
  });
}

function metric(text, name) {
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.split(' ')[1]) : -1;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function stream() {
  const minDelay = Number(arg);
  const session = connect();
  // 50 ms a token ([[fake:slow]]): the pacing, not the engine, sets the gaps.
  const req = post(session, '/v1/chat/completions', chatBody({
    max_tokens: 12, stream_options: { min_delay_ms: minDelay, include_usage: true },
    messages: [{ role: 'user', content: '[[fake:slow]] Hello' }],
  }));
  let status = 0;
  let contentType = '';
  const arrivals = [];
  let body = '';
  req.on('response', (h) => {
    status = h[':status'];
    contentType = h['content-type'];
  });
  req.setEncoding('utf8');
  req.on('data', (c) => {
    // Content events only: the role chunk and the end may come closer.
    if (/"content":"[^"]/.test(c)) arrivals.push(performance.now());
    body += c;
  });
  await new Promise((resolve, reject) => {
    req.on('end', resolve);
    req.on('error', reject);
  });
  session.close();
  const gaps = [];
  for (let i = 1; i < arrivals.length; i++) gaps.push(arrivals[i] - arrivals[i - 1]);
  let text = '';
  const events = body.split('\n\n').filter((e) => e.startsWith('data: '));
  for (const e of events) {
    const data = e.slice(6);
    if (data === '[DONE]') continue;
    const o = JSON.parse(data);
    if (o.choices.length > 0 && o.choices[0].delta.content) text += o.choices[0].delta.content;
  }
  return {
    status, content_type: contentType, n_events: events.length, n_chunks: arrivals.length,
    min_gap_ms: gaps.length ? Math.min(...gaps) : -1, done: events.at(-1) === 'data: [DONE]', text,
  };
}

async function settings() {
  const session = connect();
  await new Promise((resolve) => session.once('remoteSettings', resolve));
  const s = session.remoteSettings;
  const models = await fetchAll(session, 'GET', '/v1/models');
  session.close();
  return { ...s, models_status: models.status, alpn: session.alpnProtocol ?? null };
}

// CVE-2023-44487: streams opened and cancelled at once, as fast as the
// client can. The server must answer GOAWAY(ENHANCE_YOUR_CALM = 11).
async function rapidReset() {
  const n = Number(arg);
  const session = connect();
  session.on('error', () => {});
  let goaway = -1;
  session.on('goaway', (code) => (goaway = code));
  await new Promise((resolve) => session.once('remoteSettings', resolve));
  const body = chatBody({ max_tokens: 2000, messages: [{ role: 'user', content: '[[fake:long]] go' }] });
  let sent = 0;
  for (let i = 0; i < n && !session.destroyed && goaway < 0; i++) {
    try {
      const req = post(session, '/v1/chat/completions', body);
      req.on('error', () => {});
      req.close(http2.constants.NGHTTP2_CANCEL);
      sent++;
    } catch {
      break;
    }
    if (i % 50 === 49) await sleep(0);  // let the frames go out
  }
  for (let i = 0; i < 200 && goaway < 0 && !session.destroyed; i++) await sleep(10);
  session.destroy();
  return { sent, goaway_code: goaway };
}

// A stream whose client does not read: the server's DATA fill the stream's
// flow-control window, the server's buffer, and the engine pauses the
// sequence (engine_requests_paused, read over a second connection). Then
// the client reads and the stream completes.
async function slowReader() {
  const session = connect({ settings: { initialWindowSize: 1024 } });
  const req = post(session, '/v1/chat/completions', JSON.stringify({
    model: 'm', max_tokens: 100000, stream: true, temperature: 0, logit_bias: { 2: -100 },
    stream_options: { include_usage: true },
    messages: [{ role: 'user', content: 'Tell me a long story' }],
  }));
  let status = 0;
  req.on('response', (h) => (status = h[':status']));
  req.pause();
  const probe = connect();
  let paused = 0;
  for (let i = 0; i < 600 && paused < 1; i++) {
    await sleep(50);
    paused = metric((await fetchAll(probe, 'GET', '/metrics')).body, 'engine_requests_paused');
  }
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (c) => (body += c));
  req.resume();
  await new Promise((resolve, reject) => {
    req.on('end', resolve);
    req.on('error', reject);
  });
  const after = metric((await fetchAll(probe, 'GET', '/metrics')).body, 'engine_requests_paused');
  probe.close();
  session.close();
  return { status, paused_seen: paused, paused_after: after, done: body.trimEnd().endsWith('data: [DONE]') };
}

// One long stream reset after its first bytes: the request ends in the engine.
async function cancel() {
  const session = connect();
  const req = post(session, '/v1/chat/completions',
    chatBody({ max_tokens: 100000, messages: [{ role: 'user', content: '[[fake:long]] [[fake:slow]] go' }] }));
  req.on('error', () => {});
  await new Promise((resolve) => req.once('data', resolve));
  req.close(http2.constants.NGHTTP2_CANCEL);
  const probe = connect();
  let running = -1;
  for (let i = 0; i < 200 && running !== 0; i++) {
    await sleep(20);
    running = metric((await fetchAll(probe, 'GET', '/metrics')).body, 'engine_requests_running');
  }
  probe.close();
  session.close();
  return { running_after: running };
}

const modes = { stream, settings, 'rapid-reset': rapidReset, 'slow-reader': slowReader, cancel };
if (!modes[mode]) {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
const timer = setTimeout(() => {
  console.log(JSON.stringify({ error: 'timeout' }));
  process.exit(3);
}, 60000);
modes[mode]().then((r) => {
  clearTimeout(timer);
  console.log(JSON.stringify(r));
  process.exit(0);
}, (e) => {
  clearTimeout(timer);
  console.log(JSON.stringify({ error: String(e) }));
  process.exit(1);
});
