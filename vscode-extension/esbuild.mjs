// Bundles the extension (node, `vscode` external), the results view's script (browser, with
// chart.js inside: the machine running VS Code may be offline), and with --tests the unit tests.
import { build } from "esbuild";
import { readdirSync } from "node:fs";

const production = process.argv.includes("--production");
const common = { bundle: true, sourcemap: !production, minify: production, logLevel: "warning" };

await build({
  ...common,
  entryPoints: ["src/extension.ts"],
  outfile: "dist/extension.js",
  platform: "node",
  format: "cjs",
  target: "node20",
  external: ["vscode"],
});
await build({
  ...common,
  entryPoints: ["src/webview/results.ts"],
  outfile: "dist/webview/results.js",
  platform: "browser",
  format: "iife",
  target: "es2022",
});
if (process.argv.includes("--tests")) {
  const tests = readdirSync("test/unit").filter((f) => f.endsWith(".test.ts"));
  await build({
    ...common,
    entryPoints: tests.map((f) => `test/unit/${f}`),
    outdir: "out/test/unit",
    platform: "node",
    format: "cjs",
    target: "node20",
    external: ["vscode"],
  });
}
