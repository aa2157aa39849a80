// Prometheus text format (0.0.4) parsed in the page, and what the dashboard
// derives from two scrapes: rates of counters and quantiles of histograms
// over the interval between them.

export interface Sample {
  labels: Record<string, string>;
  value: number;
}
export type Scrape = Map<string, Sample[]>;

export function parseProm(text: string): Scrape {
  const out: Scrape = new Map();
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    if (m[3]) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
      for (let l; (l = re.exec(m[3])); ) labels[l[1]] = l[2].replace(/\\n/g, "\n").replace(/\\(.)/g, "$1");
    }
    const v = m[4] === "+Inf" ? Infinity : m[4] === "-Inf" ? -Infinity : Number(m[4]);
    let list = out.get(m[1]);
    if (!list) out.set(m[1], (list = []));
    list.push({ labels, value: v });
  }
  return out;
}

// The sum of a family's samples whose labels include `match`.
export function total(s: Scrape, name: string, match: Record<string, string> = {}): number {
  let sum = 0;
  for (const x of s.get(name) ?? []) {
    if (Object.entries(match).every(([k, v]) => x.labels[k] === v)) sum += x.value;
  }
  return sum;
}

// Cumulative bucket counts of a histogram (summed over its other labels),
// by upper bound, ascending.
export function buckets(s: Scrape, name: string): [number, number][] {
  const by = new Map<number, number>();
  for (const x of s.get(name + "_bucket") ?? []) {
    const le = x.labels.le === "+Inf" ? Infinity : Number(x.labels.le);
    by.set(le, (by.get(le) ?? 0) + x.value);
  }
  return [...by.entries()].sort((a, b) => a[0] - b[0]);
}

// The q-quantile of the observations between two scrapes (`prev` null: since
// the start), interpolated linearly inside a bucket as Prometheus's
// histogram_quantile does; NaN when no observation fell in the interval.
export function quantile(q: number, cur: [number, number][], prev: [number, number][] | null): number {
  const prevAt = new Map(prev ?? []);
  const d = cur.map(([le, c]) => [le, c - (prevAt.get(le) ?? 0)] as [number, number]);
  const n = d.length ? d[d.length - 1][1] : 0;
  if (!(n > 0)) return NaN;
  const rank = q * n;
  let lo = 0;
  let below = 0;
  for (const [le, c] of d) {
    if (c >= rank) {
      if (le === Infinity) return lo; // past the last finite bound
      const inBucket = c - below;
      return inBucket > 0 ? lo + ((le - lo) * (rank - below)) / inBucket : le;
    }
    lo = le;
    below = c;
  }
  return lo;
}
