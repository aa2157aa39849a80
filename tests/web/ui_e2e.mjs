// The playground and dashboard in Debian's chromium (playwright-core) against
// the real server on stories260K (tests/web/run.sh starts it). The tests run
// in order on one page: load, chat, stop, dashboard, phone width; then the
// tool round trip on the test server's fake engine (a model that calls tools).
import test from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { join } from "node:path";

const base = process.env.ZL_BASE_URL;
const fakeBase = process.env.ZL_FAKE_URL; // zerolayer_test_server --fake-engine, for the tool round trip
const key = process.env.ZL_API_KEY;
const artifacts = process.env.ZL_ARTIFACTS;
const { chromium } = createRequire(join(process.env.ZL_WEB_DIR, "package.json"))("playwright-core");

const browser = await chromium.launch({
  executablePath: process.env.ZL_CHROMIUM,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update"],
});
const context = await browser.newContext({
  viewport: { width: 1200, height: 800 }, colorScheme: "light", permissions: ["clipboard-read", "clipboard-write"],
});
const page = await context.newPage();
const external = [];
const consoleErrors = [];
const pageRequests = [];
page.on("request", (r) => {
  pageRequests.push(r.url());
  const own = r.url().startsWith(base + "/") || (fakeBase && r.url().startsWith(fakeBase + "/"));
  if (!own && !r.url().startsWith("data:")) external.push(r.url());
});
page.on("console", (m) => {
  if (m.type() === "error") consoleErrors.push(m.text());
});
page.on("pageerror", (e) => consoleErrors.push(String(e)));
context.on("console", (m) => {
  if (m.type() === "error" && m.page() !== page) consoleErrors.push(m.text());
});
test.after(() => browser.close());

async function metric(name) {
  const text = await (await fetch(`${base}/metrics`)).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(name + " ") || line.startsWith(name + "{")) sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return sum;
}
const client499 = () => metric('engine_requests_total{api="anthropic",status="499"}');

async function waitFor(what, f, timeoutMs = 10000) {
  const t0 = Date.now();
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const answers = page.getByTestId("answer");
const stats = page.getByTestId("stats");

test("the page loads from the binary alone, with no console error", async () => {
  const res = await page.goto(base + "/");
  assert.equal(res.status(), 200);
  assert.match(res.headers()["content-type"], /^text\/html/);
  assert.match(res.headers()["content-security-policy"], /default-src 'none'/);
  await page.getByTestId("prompt").waitFor();
  assert.equal(await page.title(), "zerolayer");
  for (const id of ["api-key", "prompt", "send", "metrics-tab"]) assert.ok(await page.getByTestId(id).isVisible(), id);
  // Every control has an accessible name.
  for (const label of ["API key", "Message", "System prompt", "Max tokens", "Temperature", "Top-p", "Min delay (ms)"]) {
    assert.equal(await page.getByLabel(label, { exact: false }).count() >= 1, true, label);
  }
  await page.screenshot({ path: join(artifacts, "chat-empty.png") });
  // curl and probes still get the banner at /.
  assert.equal(await (await fetch(base + "/")).text(), "zerolayer\n");
});

test("without the key the answer is the server's 401, shown in the page", async () => {
  await page.getByTestId("prompt").fill("Hello");
  await page.getByTestId("send").click();
  await page.getByTestId("answer").last().getByText("authentication_error").waitFor();
  await page.getByRole("button", { name: "Clear" }).click();
  assert.equal(await answers.count(), 0);
});

test("a prompt streams an answer (Enter sends) and the stats appear; a second turn carries the first", async () => {
  await page.getByTestId("api-key").fill(key);
  assert.equal(await page.evaluate(() => sessionStorage.getItem("zerolayer.apiKey")), key);
  await page.getByLabel("Max tokens").fill("48");
  await page.getByLabel("Min delay (ms)").fill("20");
  await page.getByTestId("prompt").fill("Once upon a time");
  await page.getByTestId("prompt").press("Enter");
  await stats.first().waitFor({ state: "visible" });
  const text = await answers.first().locator(".body").innerText();
  assert.ok(text.trim().length > 10, `answer: ${text}`);
  const s = stats.first();
  assert.match(await s.locator('[data-stat="ttft"] dd').innerText(), /^\d+ ms$/);
  assert.match(await s.locator('[data-stat="tps"] dd').innerText(), /^\d+(\.\d)?$/);
  assert.equal(await s.locator('[data-stat="out"] dd').innerText(), "48");
  assert.match(await s.locator('[data-stat="stop"] dd').innerText(), /^max_tokens$/);
  assert.match(await s.locator('[data-stat="request-id"] dd').innerText(), /^req_/);
  // Prompt tokens: computed ("in") plus taken from the prefix cache ("cached").
  const prompt = async (st) => Number(await st.locator('[data-stat="in"] dd').innerText()) + Number(await st.locator('[data-stat="cached"] dd').innerText());
  const in1 = await prompt(s);
  assert.ok(in1 > 0);
  await page.screenshot({ path: join(artifacts, "chat.png") });
  await answers.first().getByRole("button", { name: "Copy this answer" }).click();
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  assert.ok(copied.trim().length > 10, `copied: ${copied}`);
  assert.equal(copied, await answers.first().getAttribute("data-text")); // the Markdown source of the answer

  // Tool definitions: malformed JSON is caught in the page, no request goes out.
  const tools = page.getByLabel("Tools", { exact: false });
  await tools.fill("[{ not json");
  await page.getByTestId("prompt").fill("And then?");
  await page.getByTestId("send").click();
  await page.getByRole("alert").filter({ hasText: "Tools:" }).waitFor();
  assert.equal(await answers.count(), 1);
  await tools.fill('[{"name": "get_weather", "description": "Weather of a city", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]');
  await page.getByTestId("send").click();
  await stats.nth(1).waitFor({ state: "visible" });
  const in2 = await prompt(stats.nth(1));
  assert.ok(in2 > in1 + 40, `the second request holds the first turn (${in1} then ${in2} prompt tokens)`);
});

test("a stop sequence from the settings ends the answer", async () => {
  await page.getByRole("button", { name: "Clear" }).click();
  await page.getByLabel("Tools", { exact: false }).fill("");
  await page.getByLabel("Max tokens").fill("200");
  await page.getByLabel("Stop sequences", { exact: false }).fill(".");
  await page.getByTestId("prompt").fill("Once upon a time");
  await page.getByTestId("send").click();
  await stats.first().waitFor({ state: "visible" });
  assert.equal(await stats.first().locator('[data-stat="stop"] dd').innerText(), "stop_sequence “.”");
  await page.getByLabel("Stop sequences", { exact: false }).fill("");
});

test("stop cancels the request on the server", async () => {
  await page.getByLabel("Max tokens").fill("4000");
  await page.getByLabel("Min delay (ms)").fill("");
  // A 4000-token answer takes about a second here; on a busy machine the
  // click can come after it ended on its own: then try again (5 times at most).
  for (let attempt = 1; ; attempt++) {
    await page.getByRole("button", { name: "Clear" }).click();
    const before = await client499();
    await page.getByTestId("prompt").fill("Once upon a time");
    await page.getByTestId("send").click();
    await answers.first().locator(".body p").first().waitFor(); // the first text is on screen
    const runningSeen = await metric("engine_requests_running");
    // Stop is disabled again once the answer is complete: then the click fails fast.
    const clicked = await page.getByTestId("stop").click({ timeout: 1000 }).then(() => true, () => false);
    await stats.first().waitFor({ state: "visible" });
    const stop = await stats.first().locator('[data-stat="stop"] dd').innerText();
    if ((!clicked || stop !== "stopped by you") && attempt < 5) continue;
    assert.equal(stop, "stopped by you");
    assert.equal(runningSeen, 1, "the request was running when Stop was clicked");
    await waitFor("the running count to drop", async () => (await metric("engine_requests_running")) === 0);
    await waitFor("the server to count a client that left", async () => (await client499()) === before + 1);
    break;
  }
  // The server's final count never came: the page does not make one up.
  assert.equal(await stats.first().locator('[data-stat="out"] dd').innerText(), "–");
  assert.ok((await answers.first().locator(".body").innerText()).length > 0, "the partial answer stays");
  assert.ok(await page.getByTestId("send").isEnabled());
});

test("the dashboard polls /metrics and draws its charts, only while it is shown", async () => {
  await page.getByTestId("metrics-tab").click();
  const metrics = page.getByTestId("metrics");
  await metrics.waitFor({ state: "visible" });
  assert.equal(await page.locator("#chat").isVisible(), false, "one view at a time");
  await waitFor("two scrapes", () => page.evaluate(() => Number(document.getElementById("chart-requests").dataset.drawn ?? 0) >= 2), 8000);
  const inked = await page.evaluate(() =>
    [...document.querySelectorAll("[data-testid=metrics] canvas")].map((c) => {
      const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
      return [c.id, n];
    }));
  assert.equal(inked.length, 6);
  for (const [id, n] of inked) assert.ok(n > 500, `${id} has ${n} drawn pixels`);
  // The tiles read the server's counters: the requests above are there.
  assert.ok((await metrics.locator(".tile").count()) >= 5);
  assert.match(await metrics.innerText(), /client_disconnected|rejected/);
  await page.screenshot({ path: join(artifacts, "dashboard.png") });
  await page.emulateMedia({ colorScheme: "dark" });
  const drawn = () => page.evaluate(() => Number(document.getElementById("chart-requests").dataset.drawn));
  const n0 = await drawn();
  await waitFor("one more scrape, drawn in the dark colours", async () => (await drawn()) > n0, 5000);
  await page.screenshot({ path: join(artifacts, "dashboard-dark.png") });
  await page.emulateMedia({ colorScheme: "light" });

  await page.getByTestId("chat-tab").click();
  const scrapes = () => pageRequests.filter((u) => u.endsWith("/metrics")).length;
  await page.waitForTimeout(300);
  const n = scrapes();
  await page.waitForTimeout(1500); // one and a half polling periods
  assert.equal(scrapes(), n, "no /metrics polling while the chat is shown");
});

test("phone width: no horizontal scrolling, settings folded", async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.reload();
  await page.getByTestId("prompt").waitFor();
  assert.equal(await page.getByTestId("api-key").inputValue(), key, "the key survives a reload (sessionStorage)");
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 390));
  assert.equal(await page.locator("details.settings").getAttribute("open"), null);
  await page.screenshot({ path: join(artifacts, "chat-phone.png") });
});

test("a tool call, then its result as the next turn (the fake engine)", { skip: !fakeBase && "no test server" }, async () => {
  const page = await context.newPage();
  const bodies = [];
  page.on("request", (r) => {
    if (r.url().endsWith("/v1/messages")) bodies.push(JSON.parse(r.postData()));
  });
  await page.goto(fakeBase + "/");
  await page.getByTestId("api-key").fill(key);
  await page.getByLabel("Tools", { exact: false }).fill(
    '[{"name": "get_weather", "description": "Weather of a city", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]');
  await page.getByTestId("prompt").fill('Weather in Paris? [[fake:tool=get_weather:{"city": "Paris"}]]');
  await page.getByTestId("prompt").press("Enter");
  const stats = page.getByTestId("stats");
  await stats.first().waitFor({ state: "visible" });
  assert.equal(await stats.first().locator('[data-stat="stop"] dd').innerText(), "tool_use");
  const answer = page.getByTestId("answer").first();
  assert.match(await answer.innerText(), /get_weather/);
  assert.match(await answer.locator("pre code").innerText(), /"city":\s*"Paris"/);
  assert.equal(bodies[0].tools[0].name, "get_weather");
  await page.screenshot({ path: join(artifacts, "chat-tool-call.png") });

  await page.getByTestId("prompt").fill("18 °C and sunny");
  await page.getByTestId("send").click();
  await stats.nth(1).waitFor({ state: "visible" });
  const second = bodies[1].messages;
  assert.equal(second.length, 3);
  assert.equal(second[1].role, "assistant");
  const toolUse = second[1].content.find((b) => b.type === "tool_use");
  assert.deepEqual(toolUse.input, { city: "Paris" });
  assert.deepEqual(second[2].content, [{ type: "tool_result", tool_use_id: toolUse.id, content: "18 °C and sunny" }]);
  assert.equal(await stats.nth(1).locator('[data-stat="stop"] dd').innerText(), "end_turn");
  await page.close();
});

test("no request left the server's origin, and the console stayed clean", () => {
  assert.deepEqual(external, []);
  // The 401 of the keyless request above is the one expected resource error.
  const unexpected = consoleErrors.filter((e) => !/status of 401/.test(e));
  assert.deepEqual(unexpected, []);
});
