// Builds the page that zerolayer embeds: src/ -> dist/ (or --out DIR).
// Output names carry a hash of their content (app.<hash>.js, app.<hash>.css),
// so the server can let browsers cache them for good; index.html refers to
// them. The output is a pure function of the sources and the locked esbuild
// version: CMake embeds it and web_bundle_check compares it with web/dist.
import { build } from "esbuild";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const i = process.argv.indexOf("--out");
const out = i > 0 ? process.argv[i + 1] : join(here, "dist");

const result = await build({
  entryPoints: [join(here, "src/main.ts")],
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2020",
  legalComments: "none",
  charset: "utf8",
  write: false,
  outdir: "out",
  logLevel: "warning",
});
const hash = (b) => createHash("sha256").update(b).digest("hex").slice(0, 12);
const files = {};
for (const f of result.outputFiles) {
  const ext = f.path.endsWith(".css") ? "css" : "js";
  files[ext] = { name: `app.${hash(f.contents)}.${ext}`, contents: f.contents };
}
const html = readFileSync(join(here, "src/index.html"), "utf8")
  .replace("{{CSS}}", files.css.name)
  .replace("{{JS}}", files.js.name);

mkdirSync(out, { recursive: true });
for (const f of readdirSync(out)) rmSync(join(out, f), { recursive: true });
writeFileSync(join(out, "index.html"), html);
for (const f of Object.values(files)) writeFileSync(join(out, f.name), f.contents);
