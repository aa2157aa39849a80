// Hand-drawn canvas charts for the dashboard: a time series chart (several
// lines over the last N seconds) and a horizontal bar chart. Colours come from
// the page's CSS custom properties, so both themes apply.

export interface Series {
  label: string;
  color: string; // a CSS custom property name, e.g. "--c1"
  values: number[]; // NaN: no value at that time (a gap)
}

function css(el: Element, name: string): string {
  return getComputedStyle(el).getPropertyValue(name).trim() || "#888";
}

// Sizes the canvas's backing store to its CSS box times the device pixel ratio.
function prepare(canvas: HTMLCanvasElement): { ctx: CanvasRenderingContext2D; w: number; h: number } | null {
  const ctx = canvas.getContext("2d");
  if (!ctx) return null;
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth;
  const h = canvas.clientHeight;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  ctx.font = "11px system-ui, sans-serif";
  return { ctx, w, h };
}

export function fmt(v: number, unit = ""): string {
  if (!Number.isFinite(v)) return "–";
  if (unit === "s") return v < 1 ? `${Number((v * 1000).toPrecision(3))} ms` : `${v.toFixed(2)} s`;
  const a = Math.abs(v);
  const s = a >= 1e6 ? `${(v / 1e6).toFixed(1)}M` : a >= 1e4 ? `${(v / 1e3).toFixed(1)}k` : a >= 100 || v === Math.round(v) ? v.toFixed(0) : a < 1 ? String(Number(v.toPrecision(2))) : v.toFixed(1);
  return unit ? `${s} ${unit}` : s;
}

// A "nice" axis maximum at or above v whose quarters (the grid lines) are
// round too: 1, 2, 4, 8 or 10 times a power of ten.
function niceMax(v: number): number {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 4, 8, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

export function lineChart(canvas: HTMLCanvasElement, series: Series[], unit = "", fixedMax = 0): void {
  const p = prepare(canvas);
  if (!p) return;
  const { ctx, w, h } = p;
  const left = 48, right = 8, top = 18, bottom = 16;
  const n = Math.max(2, ...series.map((s) => s.values.length));
  let max = fixedMax;
  if (!max) for (const s of series) for (const v of s.values) if (Number.isFinite(v)) max = Math.max(max, v);
  max = fixedMax || niceMax(max);
  const x = (i: number) => left + ((w - left - right) * i) / (n - 1);
  const y = (v: number) => top + (h - top - bottom) * (1 - v / max);
  ctx.strokeStyle = css(canvas, "--grid");
  ctx.fillStyle = css(canvas, "--muted");
  ctx.lineWidth = 1;
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (let k = 0; k <= 4; k++) {
    const v = (max * k) / 4;
    ctx.beginPath();
    ctx.moveTo(left, Math.round(y(v)) + 0.5);
    ctx.lineTo(w - right, Math.round(y(v)) + 0.5);
    ctx.stroke();
    ctx.fillText(fmt(v, unit), left - 4, y(v));
  }
  ctx.textAlign = "left";
  ctx.textBaseline = "top";
  ctx.fillText(`${n - 1} s ago`, left, h - bottom + 3);
  ctx.textAlign = "right";
  ctx.fillText("now", w - right, h - bottom + 3);
  // Legend, top left, each label in its line's colour with the latest value.
  let lx = left;
  ctx.textAlign = "left";
  ctx.textBaseline = "alphabetic";
  for (const s of series) {
    const last = s.values.length ? s.values[s.values.length - 1] : NaN;
    const label = `${s.label} ${fmt(last, unit)}`;
    ctx.fillStyle = css(canvas, s.color);
    ctx.fillRect(lx, 6, 10, 3);
    ctx.fillStyle = css(canvas, "--fg");
    ctx.fillText(label, lx + 13, 12);
    lx += ctx.measureText(label).width + 26;
  }
  ctx.lineWidth = 2;
  ctx.lineJoin = "round";
  for (const s of series) {
    ctx.strokeStyle = css(canvas, s.color);
    ctx.beginPath();
    let pen = false;
    const off = n - s.values.length;
    s.values.forEach((v, i) => {
      if (!Number.isFinite(v)) {
        pen = false;
        return;
      }
      const px = x(i + off), py = y(Math.min(v, max));
      if (pen) ctx.lineTo(px, py);
      else ctx.moveTo(px, py);
      pen = true;
    });
    ctx.stroke();
  }
}

export function barChart(canvas: HTMLCanvasElement, bars: { label: string; value: number }[], empty: string): void {
  const p = prepare(canvas);
  if (!p) return;
  const { ctx, w, h } = p;
  ctx.textBaseline = "middle";
  if (!bars.length) {
    ctx.fillStyle = css(canvas, "--muted");
    ctx.textAlign = "center";
    ctx.fillText(empty, w / 2, h / 2);
    return;
  }
  const max = Math.max(...bars.map((b) => b.value));
  const row = Math.min(22, (h - 4) / bars.length);
  const labelW = Math.min(w * 0.45, Math.max(...bars.map((b) => ctx.measureText(b.label).width)) + 8);
  bars.forEach((b, i) => {
    const cy = 2 + row * i + row / 2;
    ctx.fillStyle = css(canvas, "--fg");
    ctx.textAlign = "right";
    ctx.fillText(b.label, labelW - 4, cy);
    const bw = ((w - labelW - 48) * b.value) / (max || 1);
    ctx.fillStyle = css(canvas, "--c4");
    ctx.fillRect(labelW, cy - row * 0.35, Math.max(1, bw), row * 0.7);
    ctx.fillStyle = css(canvas, "--fg");
    ctx.textAlign = "left";
    ctx.fillText(fmt(b.value), labelW + bw + 4, cy);
  });
}
