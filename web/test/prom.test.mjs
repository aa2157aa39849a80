// The dashboard's reading of /metrics (web/src/prom.ts).
import test from "node:test";
import assert from "node:assert/strict";
import { load } from "./load.mjs";

const { parseProm, total, buckets, quantile } = await load("prom");

const kText = `# HELP engine_requests_running Sequences in the batch
# TYPE engine_requests_running gauge
engine_requests_running 2
engine_requests_rejected_total{api="anthropic",reason="overloaded"} 3
engine_requests_rejected_total{api="openai",reason="overloaded"} 1
engine_requests_rejected_total{api="openai",reason="a\\"b\\\\c"} 5
engine_ttft_seconds_bucket{le="0.1"} 2
engine_ttft_seconds_bucket{le="1"} 6
engine_ttft_seconds_bucket{le="+Inf"} 8
engine_efficiency_ratio NaN
`;

test("samples, labels with escapes, sums by label", () => {
  const s = parseProm(kText);
  assert.equal(total(s, "engine_requests_running"), 2);
  assert.equal(total(s, "engine_requests_rejected_total", { reason: "overloaded" }), 4);
  assert.equal(total(s, "engine_requests_rejected_total", { reason: 'a"b\\c' }), 5);
  assert.ok(Number.isNaN(total(s, "engine_efficiency_ratio")));
  assert.equal(total(s, "absent"), 0);
});

test("quantiles interpolate inside a bucket, over the interval between scrapes", () => {
  const b = buckets(parseProm(kText), "engine_ttft_seconds");
  assert.deepEqual(b, [[0.1, 2], [1, 6], [Infinity, 8]]);
  assert.equal(quantile(0.25, b, null), 0.1); // rank 2: the top of the first bucket
  assert.ok(Math.abs(quantile(0.5, b, null) - 0.55) < 1e-9); // rank 4: half-way through (0.1, 1]
  assert.equal(quantile(0.99, b, null), 1); // in +Inf: the last finite bound
  const prev = [[0.1, 2], [1, 2], [Infinity, 2]];
  assert.ok(Math.abs(quantile(0.5, b, prev) - 0.775) < 1e-9); // 6 new, none ≤ 0.1, 4 in (0.1, 1]: rank 3 is 3/4 through it
  assert.ok(Number.isNaN(quantile(0.5, b, b)));
});
