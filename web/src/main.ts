// The playground (chat over /v1/messages streaming) and the dashboard
// (charts of /metrics), wired to the static page in index.html.
import "./style.css";
import { render } from "./markdown";
import { MessageAccumulator, StreamResult, streamMessage } from "./sse";
import { buckets, parseProm, quantile, total, Scrape } from "./prom";
import { barChart, fmt, lineChart } from "./charts";

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;
const kKeyStorage = "zerolayer.apiKey";

// ---------------------------------------------------------------- API key

const keyInput = $<HTMLInputElement>("api-key");
keyInput.value = sessionStorage.getItem(kKeyStorage) ?? "";
keyInput.addEventListener("input", () => {
  if (keyInput.value) sessionStorage.setItem(kKeyStorage, keyInput.value);
  else sessionStorage.removeItem(kKeyStorage);
});
const apiKey = () => keyInput.value.trim();

// ---------------------------------------------------------------- tabs

const tabs = [$("chat-tab"), $("metrics-tab")];
function selectTab(tab: HTMLElement): void {
  for (const t of tabs) {
    const on = t === tab;
    t.setAttribute("aria-selected", String(on));
    t.tabIndex = on ? 0 : -1;
    $(t.getAttribute("aria-controls")!).hidden = !on;
  }
  dashboard.setActive(tab.id === "metrics-tab");
  window.history.replaceState(null, "", tab.id === "metrics-tab" ? "#dashboard" : "#");
}
for (const t of tabs) {
  t.addEventListener("click", () => selectTab(t));
  t.addEventListener("keydown", (e) => {
    if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
    const next = tabs[(tabs.indexOf(t) + 1) % tabs.length];
    selectTab(next);
    next.focus();
  });
}

// ---------------------------------------------------------------- chat

interface Turn {
  role: "user" | "assistant";
  content: unknown;
}
let conversation: Turn[] = [];
let pendingToolUses: string[] = []; // tool_use ids the next user message answers
let inflight: AbortController | null = null;
let epoch = 0; // bumped by Clear: an answer still arriving then no longer belongs to the conversation

const log = $<HTMLOListElement>("log");
const prompt = $<HTMLTextAreaElement>("prompt");
const sendBtn = $<HTMLButtonElement>("send");
const stopBtn = $<HTMLButtonElement>("stop");
const settingsError = $("settings-error");
// On a phone the settings start folded, above the conversation.
if (window.matchMedia("(max-width: 760px)").matches) document.querySelector<HTMLDetailsElement>(".settings")!.open = false;

function num(id: string): number | undefined {
  const v = $<HTMLInputElement>(id).value.trim();
  return v === "" ? undefined : Number(v);
}

// The request body from the settings, or an error message for a field.
function buildRequest(): { body: Record<string, unknown> } | { error: string } {
  const body: Record<string, unknown> = { model: "default", max_tokens: num("max-tokens") ?? 256, stream: true };
  const system = $<HTMLTextAreaElement>("system").value;
  if (system.trim()) body.system = system;
  const t = num("temperature");
  if (t !== undefined) body.temperature = t;
  const p = num("top-p");
  if (p !== undefined) body.top_p = p;
  const stops = $<HTMLTextAreaElement>("stop-sequences").value.split("\n").filter((s) => s !== "");
  if (stops.length) body.stop_sequences = stops;
  const so: Record<string, number> = {};
  const mb = num("max-buffer-size"), md = num("min-delay-ms"), rtt = num("network-rtt-ms");
  if (mb !== undefined) so.max_buffer_size = mb;
  if (md !== undefined) so.min_delay_ms = md;
  if (rtt !== undefined) so.network_rtt_ms = rtt;
  if (Object.keys(so).length) body.stream_options = so;
  const tools = $<HTMLTextAreaElement>("tools").value.trim();
  if (tools) {
    try {
      const parsed = JSON.parse(tools);
      if (!Array.isArray(parsed)) return { error: "Tools: expected a JSON array of tool definitions" };
      body.tools = parsed;
    } catch (e) {
      return { error: `Tools: ${(e as Error).message}` };
    }
  }
  return { body };
}

function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls = "", text = ""): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text) e.textContent = text;
  return e;
}

// The Clipboard API needs a secure context (https, or a loopback address);
// over plain http elsewhere, the older selection copy still works.
async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const ta = el("textarea");
    ta.value = text;
    ta.className = "sr-only";
    document.body.append(ta);
    ta.select();
    const ok = document.execCommand("copy");
    ta.remove();
    return ok;
  }
}

function addUser(text: string): void {
  const li = el("li", "msg user", text);
  li.setAttribute("aria-label", "You");
  log.append(li);
}

// One assistant message in the log: its rendered body, a copy button and the stats line.
function addAnswer(): { body: HTMLElement; stats: HTMLElement; row: HTMLElement } {
  const li = el("li", "msg assistant");
  li.dataset.testid = "answer";
  li.setAttribute("aria-label", "Assistant");
  const body = el("div", "body");
  const row = el("div", "tools-row");
  const stats = el("dl", "stats");
  stats.dataset.testid = "stats";
  stats.hidden = true;
  const copy = el("button", "", "Copy");
  copy.type = "button";
  copy.setAttribute("aria-label", "Copy this answer");
  copy.addEventListener("click", async () => {
    copy.textContent = (await copyText(li.dataset.text ?? "")) ? "Copied" : "Copy failed";
    setTimeout(() => (copy.textContent = "Copy"), 1500);
  });
  row.append(copy, stats);
  li.append(body, row);
  log.append(li);
  return { body, stats, row };
}

function showStats(dl: HTMLElement, items: [string, string, string][]): void {
  dl.replaceChildren();
  for (const [key, label, value] of items) {
    const d = el("div");
    d.dataset.stat = key;
    d.append(el("dt", "", label), el("dd", "", value));
    dl.append(d);
  }
  dl.hidden = false;
}

// Renders the message so far: text as Markdown, tool calls as JSON, thinking as a quote.
function renderMessage(into: HTMLElement, msg: MessageAccumulator): string {
  let plain = "";
  const parts: HTMLElement[] = [];
  for (const b of msg.blocks) {
    if (!b) continue;
    const div = el("div");
    if (b.type === "text") {
      render(document, div, b.text);
      plain += b.text;
    } else if (b.type === "thinking") {
      div.className = "muted";
      render(document, div, b.thinking);
    } else {
      div.className = "tool";
      const json = b.partial_json || JSON.stringify(b.input);
      render(document, div, `**tool_use** \`${b.name}\` (\`${b.id}\`)\n\`\`\`json\n${json}\n\`\`\``);
      plain += `${b.name}(${json})`;
    }
    parts.push(div);
  }
  into.replaceChildren(...parts);
  return plain;
}

// The numbers beside an answer: [key, label, value]. Times from
// performance.now(): t0 the send, tFirst the first text, tLast message_delta
// (0 when the answer never completed).
function answerStats(result: StreamResult, t: { t0: number; tFirst: number; tLast: number }): [string, string, string][] {
  const { t0, tFirst, tLast } = t;
  const msg = result.message;
  const u = msg.usage;
  // Stopped before message_delta: the server's final count never came.
  const outTokens = tLast ? u.output_tokens ?? 0 : NaN;
  // The rate the reader saw: first text on screen to the complete answer; an
  // answer that came in one piece (coalesced by min_delay_ms, say) counts from the send.
  const decodeS = (tLast - tFirst) / 1000;
  const tps = decodeS >= 0.001 ? (outTokens - 1) / decodeS : outTokens / ((tLast - t0) / 1000);
  return [
    ["ttft", "TTFT", tFirst ? `${(tFirst - t0).toFixed(0)} ms` : "–"],
    ["tps", "tokens/s", outTokens > 1 && Number.isFinite(tps) ? tps.toFixed(1) : "–"],
    ["in", "in", String(u.input_tokens ?? "–")],
    ["out", "out", Number.isNaN(outTokens) ? "–" : String(outTokens)],
    ["cached", "cached", String(u.cache_read_input_tokens ?? 0)], // prompt tokens from the prefix cache, not in "in"
    ["stop", "stop", result.aborted ? "stopped by you" : msg.stop_reason ? msg.stop_reason + (msg.stop_sequence ? ` “${msg.stop_sequence}”` : "") : "–"],
    ["request-id", "request id", result.requestId || "–"],
  ];
}

async function send(): Promise<void> {
  const text = prompt.value;
  if (!text.trim() || inflight) return;
  const built = buildRequest();
  settingsError.hidden = !("error" in built);
  if ("error" in built) {
    settingsError.textContent = built.error;
    return;
  }
  const userContent = pendingToolUses.length
    ? pendingToolUses.map((id) => ({ type: "tool_result", tool_use_id: id, content: text }))
    : text;
  const turns: Turn[] = [...conversation, { role: "user", content: userContent }];
  const body = { ...built.body, messages: turns };
  prompt.value = "";
  addUser(text);
  const view = addAnswer();
  view.body.append(el("span", "muted", "…"));
  inflight = new AbortController();
  sendBtn.disabled = true;
  stopBtn.disabled = false;
  const t0 = performance.now();
  let tFirst = 0, tLast = 0;
  let frame = 0;
  const li = view.body.parentElement!;
  li.setAttribute("aria-busy", "true"); // screen readers wait for the whole answer
  const started = epoch;
  const result = await streamMessage({
    url: "/v1/messages",
    body,
    apiKey: apiKey(),
    signal: inflight.signal,
    onEvent: (_ev, added, msg) => {
      if (added && !tFirst) tFirst = performance.now();
      if (msg.stop_reason && !tLast) tLast = performance.now(); // message_delta: the answer is complete
      // One render per animation frame however many events arrive.
      if (!frame) frame = requestAnimationFrame(() => {
        frame = 0;
        li.dataset.text = renderMessage(view.body, msg);
        log.scrollTop = log.scrollHeight;
      });
    },
  });
  if (frame) cancelAnimationFrame(frame);
  li.setAttribute("aria-busy", "false");
  inflight = null;
  sendBtn.disabled = false;
  stopBtn.disabled = true;
  if (epoch !== started) return; // cleared meanwhile
  const msg = result.message;
  li.dataset.text = renderMessage(view.body, msg);
  showStats(view.stats, answerStats(result, { t0, tFirst, tLast }));
  if (msg.error) {
    const p = el("p", "error", `${msg.error.type}${msg.error.reason ? ` (${msg.error.reason})` : ""}: ${msg.error.message}`);
    p.setAttribute("role", "alert");
    view.body.append(p);
  }
  const content = msg.content();
  if (content.length && !msg.error) {
    conversation = [...turns, { role: "assistant", content }];
    pendingToolUses = msg.blocks.filter((b) => b && b.type === "tool_use").map((b) => (b as { id: string }).id);
    if (pendingToolUses.length) prompt.placeholder = "Tool result for the call above (sent as tool_result)";
  } else if (!msg.error && !result.aborted) {
    conversation = turns; // an empty answer: the user turn still happened
  }
  if (!pendingToolUses.length) prompt.placeholder = "Message (Enter to send, Shift+Enter for a new line)";
  prompt.focus();
}

$<HTMLFormElement>("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  void send();
});
prompt.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    void send();
  }
});
// Aborting the fetch closes the connection: the server cancels the sequence.
stopBtn.addEventListener("click", () => inflight?.abort());
$("clear").addEventListener("click", () => {
  inflight?.abort();
  epoch++;
  conversation = [];
  pendingToolUses = [];
  log.replaceChildren();
  prompt.focus();
});

// ---------------------------------------------------------------- dashboard

const kHistory = 120; // seconds shown
const kWindow = 10; // scrapes over which percentiles are taken

class Dashboard {
  private active = false;
  private timer = 0;
  private scrapes: { t: number; s: Scrape }[] = [];
  private series = new Map<string, number[]>();

  setActive(on: boolean): void {
    this.active = on;
    if (on && !this.timer) void this.poll();
  }

  private push(name: string, v: number): number[] {
    let a = this.series.get(name);
    if (!a) this.series.set(name, (a = []));
    a.push(v);
    if (a.length > kHistory) a.shift();
    return a;
  }

  // One scrape, then the next a second later, only while the tab is shown
  // and the page visible: no page open, no requests.
  private async poll(): Promise<void> {
    this.timer = 0;
    if (!this.active) return;
    if (document.visibilityState === "visible") {
      const status = $("metrics-status");
      try {
        const headers: Record<string, string> = {};
        if (apiKey()) headers["x-api-key"] = apiKey();
        const res = await fetch("/metrics", { headers, cache: "no-store" });
        if (res.ok) {
          this.update(parseProm(await res.text()), performance.now() / 1000);
          status.textContent = `Updated ${new Date().toLocaleTimeString()} · polling /metrics every second while this tab is open`;
          status.classList.remove("error");
        } else {
          status.textContent = `/metrics answered HTTP ${res.status}${res.status === 401 ? ": enter an API key above" : ""}`;
          status.classList.add("error");
        }
      } catch (e) {
        status.textContent = `/metrics: ${(e as Error).message}`;
        status.classList.add("error");
      }
    }
    if (this.active) this.timer = window.setTimeout(() => void this.poll(), 1000);
  }

  private update(s: Scrape, t: number): void {
    const prev = this.scrapes.length ? this.scrapes[this.scrapes.length - 1] : null;
    const old = this.scrapes.length >= kWindow ? this.scrapes[this.scrapes.length - kWindow] : this.scrapes[0] ?? null;
    this.scrapes.push({ t, s });
    if (this.scrapes.length > kWindow + 1) this.scrapes.shift();
    const rate = (name: string) => (prev ? Math.max(0, total(s, name) - total(prev.s, name)) / Math.max(1e-3, t - prev.t) : NaN);
    const pct = (name: string, q: number) => quantile(q, buckets(s, name), old ? buckets(old.s, name) : null);

    const running = this.push("running", total(s, "engine_requests_running"));
    const waiting = this.push("waiting", total(s, "engine_requests_waiting"));
    const gen = this.push("gen", rate("engine_generation_tokens_total"));
    const pre = this.push("prompt", rate("engine_prompt_tokens_total"));
    const ttft50 = this.push("ttft50", pct("engine_time_to_first_token_seconds", 0.5));
    const ttft95 = this.push("ttft95", pct("engine_time_to_first_token_seconds", 0.95));
    const itl50 = this.push("itl50", pct("engine_inter_token_latency_seconds", 0.5));
    const itl95 = this.push("itl95", pct("engine_inter_token_latency_seconds", 0.95));
    const kv = this.push("kv", total(s, "engine_kv_cache_usage_percent"));

    const rejections = (s.get("engine_requests_rejected_total") ?? [])
      .reduce((m, x) => m.set(x.labels.reason ?? "?", (m.get(x.labels.reason ?? "?") ?? 0) + x.value), new Map<string, number>());
    const bars = [...rejections.entries()].filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]).slice(0, 8)
      .map(([label, value]) => ({ label, value }));

    this.tiles([
      ["running", fmt(running[running.length - 1])],
      ["waiting", fmt(waiting[waiting.length - 1])],
      ["generated tok/s", fmt(gen[gen.length - 1])],
      ["KV cache", `${fmt(kv[kv.length - 1])} %`],
      ["requests", fmt(total(s, "engine_requests_total"))],
      ["rejected", fmt(total(s, "engine_requests_rejected_total"))],
      ["cached prompt tokens", fmt(total(s, "engine_cached_tokens_total"))],
    ]);
    const draw = (id: string, f: (c: HTMLCanvasElement) => void) => {
      const c = $<HTMLCanvasElement>(id);
      f(c);
      c.dataset.drawn = String(Number(c.dataset.drawn ?? 0) + 1);
    };
    draw("chart-requests", (c) => lineChart(c, [{ label: "running", color: "--c1", values: running }, { label: "waiting", color: "--c2", values: waiting }]));
    draw("chart-tokens", (c) => lineChart(c, [{ label: "generated", color: "--c1", values: gen }, { label: "prompt", color: "--c3", values: pre }]));
    draw("chart-ttft", (c) => lineChart(c, [{ label: "p50", color: "--c1", values: ttft50 }, { label: "p95", color: "--c2", values: ttft95 }], "s"));
    draw("chart-itl", (c) => lineChart(c, [{ label: "p50", color: "--c1", values: itl50 }, { label: "p95", color: "--c2", values: itl95 }], "s"));
    draw("chart-kv", (c) => lineChart(c, [{ label: "used", color: "--c3", values: kv }], "%", 100));
    draw("chart-rejections", (c) => barChart(c, bars, "no rejections"));
  }

  private tiles(items: [string, string][]): void {
    const box = $("tiles");
    box.replaceChildren(...items.map(([k, v]) => {
      const d = el("div", "tile");
      d.append(el("div", "v", v), el("div", "k", k));
      return d;
    }));
  }
}

const dashboard = new Dashboard();
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") dashboard.setActive(!$("metrics").hidden);
});
if (location.hash === "#dashboard") selectTab($("metrics-tab"));
