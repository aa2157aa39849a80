// The SSE client of the playground: an incremental text/event-stream parser
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation)
// and the Anthropic Messages stream folded into one message. No DOM here, so
// node's test runner covers it (web/test/sse.test.mjs).

export interface SseEvent {
  event: string; // "message" when the stream named none
  data: string;
}

// Feed it decoded text in chunks of any size (a chunk may end inside a line
// or between "\r" and "\n"); it returns the events each chunk completed.
export class SseParser {
  private buf = "";
  private event = "";
  private data: string[] = [];
  private pendingCR = false;

  push(chunk: string): SseEvent[] {
    const out: SseEvent[] = [];
    let text = chunk;
    if (this.pendingCR) {
      // "\r" ended the previous chunk: a "\n" here belongs to that line end.
      if (text.startsWith("\n")) text = text.slice(1);
      this.pendingCR = false;
    }
    this.buf += text;
    let start = 0;
    for (let i = 0; i < this.buf.length; i++) {
      const c = this.buf.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      const line = this.buf.slice(start, i);
      if (c === 13) {
        if (i + 1 === this.buf.length) this.pendingCR = true;
        else if (this.buf.charCodeAt(i + 1) === 10) i++;
      }
      start = i + 1;
      this.line(line, out);
    }
    this.buf = this.buf.slice(start);
    return out;
  }

  // The stream ended: an unterminated event is dropped, as the spec says.
  end(): void {
    this.buf = "";
    this.event = "";
    this.data = [];
    this.pendingCR = false;
  }

  private line(line: string, out: SseEvent[]): void {
    if (line === "") {
      if (this.data.length > 0) out.push({ event: this.event || "message", data: this.data.join("\n") });
      this.event = "";
      this.data = [];
      return;
    }
    if (line.startsWith(":")) return; // a comment (keep-alive)
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
    // id and retry mean nothing to a one-shot fetch stream.
  }
}

export interface Usage {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_input_tokens?: number;
  cache_creation_input_tokens?: number;
}

export type Block =
  | { type: "text"; text: string }
  | { type: "thinking"; thinking: string; signature?: string }
  | { type: "tool_use"; id: string; name: string; input: unknown; partial_json: string };

export interface ApiErrorBody {
  type: string;
  message: string;
  reason?: string;
}

// One assistant message, built from the stream's events in order.
export class MessageAccumulator {
  id = "";
  model = "";
  blocks: Block[] = [];
  usage: Usage = {};
  stop_reason: string | null = null;
  stop_sequence: string | null = null;
  error: ApiErrorBody | null = null;
  done = false;

  // Applies one event; returns the text it added to the answer (for
  // time-to-first-token and the live view), "" for every other event.
  apply(ev: SseEvent): string {
    if (ev.event === "ping") return "";
    let msg: any;
    try {
      msg = JSON.parse(ev.data);
    } catch {
      throw new Error(`malformed SSE data for event ${ev.event}`);
    }
    switch (msg.type) {
      case "message_start":
        this.id = msg.message?.id ?? "";
        this.model = msg.message?.model ?? "";
        Object.assign(this.usage, msg.message?.usage ?? {});
        return "";
      case "content_block_start": {
        const b = msg.content_block ?? {};
        if (b.type === "tool_use") this.blocks[msg.index] = { type: "tool_use", id: b.id, name: b.name, input: {}, partial_json: "" };
        else if (b.type === "thinking") this.blocks[msg.index] = { type: "thinking", thinking: b.thinking ?? "" };
        else this.blocks[msg.index] = { type: "text", text: b.text ?? "" };
        return "";
      }
      case "content_block_delta": {
        const b = this.blocks[msg.index];
        const d = msg.delta ?? {};
        if (!b) return "";
        if (d.type === "text_delta" && b.type === "text") {
          b.text += d.text;
          return d.text;
        }
        if (d.type === "thinking_delta" && b.type === "thinking") {
          b.thinking += d.thinking;
          return d.thinking;
        }
        if (d.type === "signature_delta" && b.type === "thinking") b.signature = d.signature;
        if (d.type === "input_json_delta" && b.type === "tool_use") {
          b.partial_json += d.partial_json;
          return d.partial_json;
        }
        return "";
      }
      case "content_block_stop": {
        const b = this.blocks[msg.index];
        if (b && b.type === "tool_use") {
          try {
            b.input = b.partial_json ? JSON.parse(b.partial_json) : {};
          } catch {
            b.input = b.partial_json;
          }
        }
        return "";
      }
      case "message_delta":
        this.stop_reason = msg.delta?.stop_reason ?? this.stop_reason;
        this.stop_sequence = msg.delta?.stop_sequence ?? this.stop_sequence;
        Object.assign(this.usage, msg.usage ?? {});
        return "";
      case "message_stop":
        this.done = true;
        return "";
      case "error":
        this.error = errorOf(msg);
        return "";
      default:
        return ""; // unknown events are ignored, as the SDKs do
    }
  }

  text(): string {
    return this.blocks.map((b) => (b.type === "text" ? b.text : "")).join("");
  }

  // The content to send back as the assistant turn of the next request.
  content(): unknown[] {
    const out: unknown[] = [];
    for (const b of this.blocks) {
      if (!b) continue;
      if (b.type === "text" && b.text) out.push({ type: "text", text: b.text });
      if (b.type === "tool_use") out.push({ type: "tool_use", id: b.id, name: b.name, input: b.input });
      if (b.type === "thinking" && b.signature) out.push({ type: "thinking", thinking: b.thinking, signature: b.signature });
    }
    return out;
  }
}

// The Anthropic error envelope ({"type":"error","error":{...}}) as one value.
export function errorOf(body: any): ApiErrorBody {
  const e = body?.error ?? body ?? {};
  return {
    type: String(e.type ?? "error"),
    message: String(e.message ?? "unknown error"),
    reason: e.detail?.reason ? String(e.detail.reason) : undefined,
  };
}

export interface StreamResult {
  status: number;
  requestId: string;
  message: MessageAccumulator;
  aborted: boolean;
}

export interface StreamOptions {
  url: string;
  body: unknown;
  apiKey?: string;
  signal?: AbortSignal;
  fetchFn?: typeof fetch;
  // Every event, after it was applied; `added` is the answer text it brought.
  onEvent?: (ev: SseEvent, added: string, msg: MessageAccumulator) => void;
  onOpen?: (status: number, requestId: string) => void;
}

// POSTs a streaming request and folds its events. An HTTP error answer (its
// JSON envelope) or an SSE `error` event ends up in `message.error`; an abort
// (the stop button) returns with `aborted` set and what had arrived so far.
export async function streamMessage(o: StreamOptions): Promise<StreamResult> {
  const headers: Record<string, string> = { "content-type": "application/json", "anthropic-version": "2023-06-01" };
  if (o.apiKey) headers["x-api-key"] = o.apiKey;
  const msg = new MessageAccumulator();
  const result: StreamResult = { status: 0, requestId: "", message: msg, aborted: false };
  const f = o.fetchFn ?? fetch;
  try {
    const res = await f(o.url, { method: "POST", headers, body: JSON.stringify(o.body), signal: o.signal });
    result.status = res.status;
    result.requestId = res.headers.get("request-id") ?? "";
    o.onOpen?.(res.status, result.requestId);
    const type = res.headers.get("content-type") ?? "";
    if (!res.ok || !type.startsWith("text/event-stream")) {
      const text = await res.text();
      let body: any = null;
      try {
        body = JSON.parse(text);
      } catch {
        body = { error: { type: "http_error", message: `HTTP ${res.status}: ${text.slice(0, 200)}` } };
      }
      if (res.ok) msg.blocks = (body.content ?? []) as Block[];
      else msg.error = errorOf(body);
      return result;
    }
    if (!res.body) throw new Error("the answer has no body");
    const parser = new SseParser();
    const decoder = new TextDecoder();
    const reader = res.body.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      for (const ev of parser.push(decoder.decode(value, { stream: true }))) {
        const added = msg.apply(ev);
        o.onEvent?.(ev, added, msg);
      }
    }
    for (const ev of parser.push(decoder.decode())) o.onEvent?.(ev, msg.apply(ev), msg);
    parser.end();
    if (!msg.done && !msg.error) msg.error = { type: "stream_error", message: "the stream ended before message_stop" };
  } catch (e: any) {
    if (o.signal?.aborted || e?.name === "AbortError") result.aborted = true;
    else msg.error = { type: "network_error", message: String(e?.message ?? e) };
  }
  return result;
}
