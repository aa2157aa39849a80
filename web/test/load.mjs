// Loads a TypeScript module of web/src for node's test runner: esbuild
// bundles it into a temporary ES module, which is then imported.
import { build } from "esbuild";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const src = join(dirname(fileURLToPath(import.meta.url)), "..", "src");

export async function load(name) {
  const r = await build({ entryPoints: [join(src, `${name}.ts`)], bundle: true, format: "esm", write: false, logLevel: "error" });
  const dir = mkdtempSync(join(tmpdir(), "zl-web-test-"));
  const file = join(dir, `${name}.mjs`);
  writeFileSync(file, r.outputFiles[0].contents);
  try {
    return await import(pathToFileURL(file).href);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
