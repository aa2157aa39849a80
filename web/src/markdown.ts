// A small Markdown subset for model output: fenced code blocks, headings,
// lists, block quotes, paragraphs; inline code, bold, italic and http(s)
// links. parse() gives a tree of plain strings; render() builds DOM nodes
// with textContent only, so nothing in the model's text can become markup
// (no innerHTML anywhere in the page).

export type Inline =
  | { t: "text"; v: string }
  | { t: "code"; v: string }
  | { t: "strong"; c: Inline[] }
  | { t: "em"; c: Inline[] }
  | { t: "link"; href: string; c: Inline[] };

export type Node =
  | { t: "p"; c: Inline[] }
  | { t: "h"; level: number; c: Inline[] }
  | { t: "pre"; lang: string; v: string }
  | { t: "ul" | "ol"; items: Inline[][] }
  | { t: "quote"; c: Inline[] };

const kFence = /^\s{0,3}(```|~~~)\s*([\w+-]*)/;

export function parse(src: string): Node[] {
  const lines = src.replace(/\r\n?/g, "\n").split("\n");
  const out: Node[] = [];
  let para: string[] = [];
  const flush = () => {
    if (para.length) out.push({ t: "p", c: inline(para.join("\n")) });
    para = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = kFence.exec(line);
    if (fence) {
      flush();
      const body: string[] = [];
      i++;
      // An unclosed fence (a stream still going) runs to the end.
      while (i < lines.length && !lines[i].trimStart().startsWith(fence[1])) body.push(lines[i++]);
      out.push({ t: "pre", lang: fence[2], v: body.join("\n") });
      continue;
    }
    const h = /^(#{1,6})\s+(.*)$/.exec(line);
    if (h) {
      flush();
      out.push({ t: "h", level: h[1].length, c: inline(h[2]) });
      continue;
    }
    const item = /^\s*([-*+]|\d+[.)])\s+(.*)$/.exec(line);
    if (item) {
      flush();
      const kind = /\d/.test(item[1]) ? "ol" : "ul";
      const last = out[out.length - 1];
      const list = last && last.t === kind ? last : { t: kind, items: [] as Inline[][] };
      if (list !== last) out.push(list as Node);
      (list as { items: Inline[][] }).items.push(inline(item[2]));
      continue;
    }
    const q = /^>\s?(.*)$/.exec(line);
    if (q) {
      flush();
      out.push({ t: "quote", c: inline(q[1]) });
      continue;
    }
    if (line.trim() === "") flush();
    else para.push(line);
  }
  flush();
  return out;
}

// Inline spans, left to right; an unmatched marker stays as text.
export function inline(s: string): Inline[] {
  const out: Inline[] = [];
  let text = "";
  const push = (n: Inline) => {
    if (text) out.push({ t: "text", v: text });
    text = "";
    out.push(n);
  };
  for (let i = 0; i < s.length; ) {
    const c = s[i];
    if (c === "`") {
      const end = s.indexOf("`", i + 1);
      if (end > i) {
        push({ t: "code", v: s.slice(i + 1, end) });
        i = end + 1;
        continue;
      }
    } else if ((c === "*" || c === "_") && s[i + 1] === c) {
      const end = s.indexOf(c + c, i + 2);
      if (end > i + 2) {
        push({ t: "strong", c: inline(s.slice(i + 2, end)) });
        i = end + 2;
        continue;
      }
    } else if (c === "*" || (c === "_" && (i === 0 || /\W/.test(s[i - 1])))) {
      const end = s.indexOf(c, i + 1);
      if (end > i + 1 && s[i + 1] !== " ") {
        push({ t: "em", c: inline(s.slice(i + 1, end)) });
        i = end + 1;
        continue;
      }
    } else if (c === "[") {
      const m = /^\[([^\]]*)\]\((https?:\/\/[^\s)]+)\)/.exec(s.slice(i));
      if (m) {
        push({ t: "link", href: m[2], c: inline(m[1]) });
        i += m[0].length;
        continue;
      }
    }
    text += c;
    i++;
  }
  if (text) out.push({ t: "text", v: text });
  return out;
}

function renderInline(doc: Document, parent: HTMLElement, items: Inline[]): void {
  for (const n of items) {
    if (n.t === "text") parent.append(doc.createTextNode(n.v));
    else if (n.t === "code") {
      const e = doc.createElement("code");
      e.textContent = n.v;
      parent.append(e);
    } else if (n.t === "link") {
      const a = doc.createElement("a");
      a.href = n.href; // parse() only lets http(s) URLs through
      a.rel = "noopener noreferrer nofollow";
      a.target = "_blank";
      renderInline(doc, a, n.c);
      parent.append(a);
    } else {
      const e = doc.createElement(n.t === "strong" ? "strong" : "em");
      renderInline(doc, e, n.c);
      parent.append(e);
    }
  }
}

// Replaces `into`'s children with the rendering of `src`.
export function render(doc: Document, into: HTMLElement, src: string): void {
  const frag = doc.createDocumentFragment();
  for (const n of parse(src)) {
    let e: HTMLElement;
    if (n.t === "pre") {
      e = doc.createElement("pre");
      const code = doc.createElement("code");
      if (n.lang) code.dataset.lang = n.lang;
      code.textContent = n.v;
      e.append(code);
    } else if ("items" in n) {
      e = doc.createElement(n.t);
      for (const it of n.items) {
        const li = doc.createElement("li");
        renderInline(doc, li, it);
        e.append(li);
      }
    } else if (n.t === "h") {
      e = doc.createElement(`h${Math.min(6, n.level + 2)}`); // the page's own headings come first
      renderInline(doc, e, n.c);
    } else {
      e = doc.createElement(n.t === "quote" ? "blockquote" : "p");
      renderInline(doc, e, n.c);
    }
    frag.append(e);
  }
  into.replaceChildren(frag);
}
