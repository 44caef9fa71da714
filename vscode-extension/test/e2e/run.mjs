// End to end in a real VS Code: code-server (VS Code 1.100 in a browser) driven in headless
// Chromium by playwright-core. Installs the built kernelbrain.vsix into a fresh code-server and
// checks, on a copy of the bundled examples, what a user does: diagnostics, the ⚡ Optimize lens,
// progress in the status bar with a Cancel notification, Preview variant (a diff editor), Accept
// (the file on disk becomes the variant, which `kernelbrain verify` then passes), Set API key (no
// file under the user-data or extensions folder holds it), and an untrusted folder (diagnostics,
// no lens, nothing of the workspace run). Screenshots go to $KB_E2E_OUT (default test-output/).
//
//   node test/e2e/run.mjs      (after scripts/setup-e2e.sh and npm run package)
import { execFileSync, spawn } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import * as path from "node:path";

const EXT = path.resolve(import.meta.dirname, "..", "..");
const REPO = path.resolve(EXT, "..");
const require = createRequire(path.join(EXT, ".e2e", "package.json"));
const { chromium } = require("playwright-core");
const CODE_SERVER = path.join(EXT, ".e2e", "node_modules", ".bin", "code-server");
const VSIX = path.join(EXT, "kernelbrain.vsix");
const PYTHON = process.env.KB_E2E_PYTHON || path.join(REPO, ".venv", "bin", "python");
const OUT = path.resolve(process.env.KB_E2E_OUT || path.join(EXT, "test-output"));
const SENTINEL = "kb-e2e-sentinel-key-7c1d9a";
const BUDGET = process.env.KB_E2E_BUDGET || "40s";
const CHROMIUM = process.env.KB_E2E_CHROMIUM || "/usr/bin/chromium";

const results = [];
function check(name, ok, detail = "") {
  results.push({ name, ok, detail });
  console.log(`${ok ? "ok  " : "FAIL"} ${name}${detail ? `: ${detail}` : ""}`);
  if (!ok) {
    throw new Error(`${name}: ${detail}`);
  }
}

function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function filesUnder(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    const st = statSync(p, { throwIfNoEntry: false });
    if (!st) continue;
    if (st.isDirectory()) out.push(...filesUnder(p));
    else if (st.isFile()) out.push(p);
  }
  return out;
}

/** A fresh code-server with the extension installed, serving `folder`. */
async function startCodeServer(folder, { trusted }) {
  const root = mkdtempSync(path.join(tmpdir(), "kb-e2e-"));
  const userData = path.join(root, "user-data");
  const extensions = path.join(root, "extensions");
  mkdirSync(path.join(userData, "User"), { recursive: true });
  const settings = {
    "kernelbrain.interpreter": [PYTHON],
    "kernelbrain.budget": BUDGET,
    "kernelbrain.llm": false,
    // the client's trace logs every message (the key's handover included) to user-data/logs:
    // the leak check below reads it
    "kernelbrain.trace.server": "verbose",
    "security.workspace.trust.enabled": !trusted ? true : false,
    "security.workspace.trust.startupPrompt": "never",
    "security.workspace.trust.emptyWindow": false,
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": false,
    "workbench.enableExperiments": false,
    "telemetry.telemetryLevel": "off",
    "extensions.autoCheckUpdates": false,
    "extensions.autoUpdate": false,
    "update.mode": "none",
    "editor.codeLens": true,
    "files.autoSave": "off",
    "window.commandCenter": false,
  };
  writeFileSync(path.join(userData, "User", "settings.json"), JSON.stringify(settings, null, 2));
  const config = path.join(root, "config.yaml");
  writeFileSync(config, "auth: none\ncert: false\n");
  execFileSync(CODE_SERVER, ["--user-data-dir", userData, "--extensions-dir", extensions, "--install-extension", VSIX], {
    stdio: "inherit",
  });
  const port = await freePort();
  const env = { ...process.env, KERNELBRAIN_MEMORY: "off" };
  delete env.VSCODE_IPC_HOOK_CLI;
  const proc = spawn(
    CODE_SERVER,
    [
      "--bind-addr", `127.0.0.1:${port}`, "--auth", "none", "--config", config,
      "--user-data-dir", userData, "--extensions-dir", extensions,
      "--disable-telemetry", "--disable-update-check", "--disable-getting-started-override",
      ...(trusted ? ["--disable-workspace-trust"] : []),
    ],
    { env, stdio: ["ignore", "pipe", "pipe"], detached: true },
  );
  let log = "";
  proc.stdout.on("data", (d) => (log += d));
  proc.stderr.on("data", (d) => (log += d));
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/healthz`);
      if (r.ok) break;
    } catch {}
    await new Promise((r) => setTimeout(r, 300));
  }
  return {
    url: `http://127.0.0.1:${port}/?folder=${encodeURIComponent(folder)}`,
    userData,
    extensions,
    log: () => log,
    stop: () => {
      try {
        process.kill(-proc.pid, "SIGTERM");
      } catch {}
      rmSync(root, { recursive: true, force: true });
    },
  };
}

async function openBrowser() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"],
  });
}

async function runCommand(page, title) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout: 15_000 });
  await input.fill(`>${title}`);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first().waitFor({ timeout: 15_000 });
  await page.keyboard.press("Enter");
}

async function openFile(page, name) {
  await page.keyboard.press("Control+P");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout: 15_000 });
  await input.fill(name);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: name }).first().waitFor({ timeout: 15_000 });
  await page.keyboard.press("Enter");
  await page.locator(".monaco-editor .view-lines").first().waitFor({ timeout: 15_000 });
}

async function load(page, url) {
  await page.goto(url);
  await page.locator(".monaco-workbench").waitFor({ timeout: 60_000 });
  await page.locator(".statusbar-item", { hasText: "KernelBrain" }).first().waitFor({ timeout: 60_000 }).catch(() => {});
}

async function problems(page) {
  await runCommand(page, "View: Focus Problems");
  const panel = page.locator(".markers-panel");
  await panel.waitFor({ timeout: 15_000 });
  return panel;
}

function workspaceCopy() {
  const ws = path.join(mkdtempSync(path.join(tmpdir(), "kb-e2e-ws-")), "examples");
  cpSync(path.join(REPO, "examples"), ws, {
    recursive: true,
    filter: (src) => !src.includes(".kernelbrain") && !src.includes("__pycache__"),
  });
  return ws;
}

/**
 * One session: code-server with the extension serving `ws`, a page loaded on it, gelu.py open
 * and KB diagnostics in the Problems panel (`prefix` names the check), then `body(page, cs)`.
 * On failure a screenshot, code-server's log and VS Code's logs go to OUT, suffixed `name`.
 */
async function withSession(browser, ws, { trusted, name, prefix = "" }, body) {
  const cs = await startCodeServer(ws, { trusted });
  const page = await browser.newPage({ viewport: { width: 1500, height: 900 } });
  try {
    await load(page, cs.url);
    await openFile(page, "gelu.py");
    const panel = await problems(page);
    await panel.locator(".monaco-list-row", { hasText: /KB1\d\d/ }).first().waitFor({ timeout: 90_000 });
    check(`${prefix}KB diagnostics appear in the Problems panel`, true);
    await body(page, cs);
  } catch (err) {
    await page.screenshot({ path: path.join(OUT, `failure-${name}.png`) }).catch(() => {});
    writeFileSync(path.join(OUT, `code-server-${name}.log`), cs.log());
    cpSync(path.join(cs.userData, "logs"), path.join(OUT, `logs-${name}`), { recursive: true });
    throw err;
  } finally {
    await page.close();
    cs.stop();
  }
}

async function trustedScenario(browser) {
  const ws = workspaceCopy();
  const file = path.join(ws, "ops", "gelu.py");
  const original = readFileSync(file, "utf8");
  await withSession(browser, ws, { trusted: true, name: "trusted" }, async (page, cs) => {
    await page.screenshot({ path: path.join(OUT, "diagnostics.png") });

    const lens = page.locator(".codelens-decoration a", { hasText: "Optimize kernel" }).first();
    if (!(await lens.waitFor({ timeout: 20_000 }).then(() => true, () => false))) {
      // code-server sometimes never asks for the lenses of an editor opened while the server
      // starts, refresh requests notwithstanding (see the closing note): reopen it, as a user would
      console.log("note: no lens after 20 s; reopening gelu.py");
      await page.locator(".monaco-editor .view-lines").first().click();
      await runCommand(page, "View: Close Editor");
      await openFile(page, "gelu.py");
    }
    await lens.waitFor({ timeout: 60_000 });
    check("the ⚡ Optimize lens is there", true, await lens.innerText());
    await lens.click();
    const toast = page.locator(".notification-toast", { hasText: "Optimizing gelu_kernel" });
    await toast.waitFor({ timeout: 60_000 });
    const cancel = toast.locator("a.monaco-button, .monaco-button", { hasText: "Cancel" });
    check("a notification with Cancel shows the search", (await cancel.count()) > 0);
    const running = page.locator(".statusbar-item", { hasText: "gelu_kernel" });
    await running.first().waitFor({ timeout: 30_000 });
    const bar = await running.first().innerText();
    check("the status bar shows the running search with its progress", /gelu_kernel (\d+%|queued)/.test(bar), bar);
    // once a variant is verified the status bar says the best so far, until the search ends
    let bestSeen = "";
    const until = Date.now() + 240_000;
    while (Date.now() < until && !bestSeen && (await toast.count()) > 0) {
      const text = await running.first().innerText().catch(() => "");
      bestSeen = /\d+% · best \d+\.\d\d×/.test(text) ? text : "";
      if (!bestSeen) await page.waitForTimeout(300);
    }
    check("the status bar shows the best so far while the search runs", bestSeen !== "", bestSeen);
    await page.screenshot({ path: path.join(OUT, "progress.png") });

    await toast.waitFor({ state: "detached", timeout: 240_000 });
    await page.locator(".notification-toast", { hasText: "KernelBrain: gelu_kernel best" }).first().waitFor({ timeout: 30_000 });
    check("when it ends, a notification says what it found", true);
    await page.locator(".statusbar-item", { hasText: "gelu_kernel" }).first().waitFor({ state: "detached", timeout: 30_000 });
    check("the search finished", true);
    await page.waitForTimeout(1500); // the trace is written behind the messages
    const trace = filesUnder(cs.userData)
      .filter((f) => f.endsWith(".log"))
      .map((f) => readFileSync(f, "utf8"))
      .join("\n");
    const listings = trace.split("\n").filter((l) => l.includes("Sending request 'kernelbrain/jobs")).length;
    const pushes = trace.split("\n").filter((l) => l.includes("'kernelbrain/jobChanged'")).length;
    check("progress and results arrive pushed, not polled", pushes >= 2 && listings <= 2, `${pushes} pushes, ${listings} listings`);

    await page.locator(".monaco-editor .view-lines").first().click();
    await runCommand(page, "KernelBrain: Preview Variant");
    // several variants: a quick pick (speedup, measured or estimated, cases); take the first
    const pick = page.locator(".quick-input-widget .monaco-list-row", { hasText: "×" }).first();
    if (await pick.waitFor({ timeout: 10_000 }).then(() => true, () => false)) {
      check("Show variants lists speedups", /\d\.\d\d×/.test(await pick.innerText()));
      await page.keyboard.press("Enter");
    }
    await page.locator(".monaco-diff-editor").first().waitFor({ timeout: 30_000 });
    check("Preview variant opens a diff editor", true);
    await runCommand(page, "Notifications: Clear All Notifications");
    await runCommand(page, "View: Hide Panel");
    await page.waitForTimeout(2500); // the results view beside it renders its chart
    await page.screenshot({ path: path.join(OUT, "preview.png") });
    const diffBox = await page.locator(".monaco-diff-editor").first().boundingBox();
    const viewBox = await page.locator("iframe.webview.ready").first().boundingBox();
    check("the diff takes the wider group, the results view the narrower",
      diffBox && viewBox && diffBox.width > 1.5 * viewBox.width, `${diffBox?.width} vs ${viewBox?.width}`);

    const accept = page.locator(".editor-actions a.action-label[aria-label*='Accept Variant']").first();
    await accept.waitFor({ timeout: 15_000 });
    check("Accept and Reject are labelled buttons, not bare icons",
      (await accept.innerText()).includes("Accept") &&
        (await page.locator(".editor-actions a.action-label[aria-label*='Reject Variant']").first().innerText()).includes("Reject"));
    await accept.click();
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && readFileSync(file, "utf8") === original) {
      await page.waitForTimeout(250);
    }
    const accepted = readFileSync(file, "utf8");
    check("Accept writes the variant to the file on disk", accepted !== original);
    check("Accept closes the preview", (await page.locator(".monaco-diff-editor").count()) === 0);
    const verify = execFileSync(PYTHON, ["-m", "kernelbrain.engine.cli.main", "verify", "ops/gelu.py::gelu_kernel",
      "--candidate", "ops/gelu.py", "--device", "cpu", "--json"], { cwd: ws, encoding: "utf8", env: { ...process.env, KERNELBRAIN_MEMORY: "off" } });
    const verdict = JSON.parse(verify);
    check("kernelbrain verify accepts the file as accepted", verdict.accepted === true, verdict.message ?? "");

    await runCommand(page, "KernelBrain: Show Search Results");
    const frame = page.frameLocator("iframe.webview.ready").frameLocator("iframe");
    await frame.locator("canvas#trajectory").waitFor({ timeout: 30_000 });
    check("the results view draws the trajectory", true);
    const marked = await frame.locator("b.applied").first().waitFor({ timeout: 15_000 }).then(() => true, () => false);
    check("the results view marks the accepted variant applied", marked);
    await runCommand(page, "Notifications: Clear All Notifications");
    await runCommand(page, "View: Close All Editors in Group");
    await page.waitForTimeout(1500);
    await page.screenshot({ path: path.join(OUT, "results-view.png") });

    await runCommand(page, "KernelBrain: Set API Key");
    const input = page.locator(".quick-input-widget input[type='password']");
    await input.waitFor({ timeout: 15_000 });
    await input.fill(SENTINEL);
    await page.keyboard.press("Enter");
    await page.locator(".notification-toast", { hasText: "key stored" }).first().waitFor({ timeout: 20_000 });
    check("Set API key stores the key and hands it to the server", true);
    await page.waitForTimeout(2000); // let anything that would persist it do so
    const leaks = [cs.userData, cs.extensions, ws]
      .flatMap(filesUnder)
      .filter((f) => readFileSync(f).includes(SENTINEL));
    check("no file under user-data, extensions or the workspace holds the key", leaks.length === 0, leaks.join(", "));
  });
}

async function untrustedScenario(browser) {
  const ws = workspaceCopy();
  // The attack: a repository's own settings name the program the extension would run.
  const marker = path.join(path.dirname(ws), "workspace-program-ran");
  writeFileSync(path.join(ws, "evil.sh"), `#!/bin/sh\ntouch '${marker}'\nexec '${PYTHON}' "$@"\n`);
  mkdirSync(path.join(ws, ".vscode"));
  writeFileSync(
    path.join(ws, ".vscode", "settings.json"),
    JSON.stringify({ "kernelbrain.interpreter": ["/bin/sh", path.join(ws, "evil.sh")], "kernelbrain.importStrategy": "fromEnvironment" }),
  );
  await withSession(browser, ws, { trusted: false, name: "untrusted", prefix: "untrusted: " }, async (page) => {
    await page.locator(".notification-toast", { hasText: "restricted mode" }).first().waitFor({ timeout: 30_000 });
    check("untrusted: the extension says why there is no lens", true);
    await page.waitForTimeout(5000);
    check("untrusted: no Optimize lens", (await page.locator(".codelens-decoration a", { hasText: "Optimize" }).count()) === 0);
    const ran = filesUnder(ws).filter((f) => f.includes("__pycache__") || f.includes(`${path.sep}.kernelbrain${path.sep}`));
    check("untrusted: nothing of the workspace imported or run", ran.length === 0, ran.join(", "));
    check("untrusted: the workspace's settings cannot choose the interpreter", !existsSync(marker));
    await page.screenshot({ path: path.join(OUT, "untrusted.png") });
  });
}

mkdirSync(OUT, { recursive: true });
if (!existsSync(VSIX)) {
  console.error(`no ${VSIX}: run npm run package first`);
  process.exit(2);
}
const browser = await openBrowser();
let failed = false;
const only = process.env.KB_E2E_ONLY; // "trusted" or "untrusted": one scenario
for (const scenario of [untrustedScenario, trustedScenario].filter((s) => !only || s.name === `${only}Scenario`)) {
  try {
    await scenario(browser);
  } catch (err) {
    failed = true;
    console.error(`${scenario.name} failed: ${err?.stack ?? err}`);
  }
}
await browser.close();
writeFileSync(path.join(OUT, "e2e-results.json"), JSON.stringify(results, null, 2));
console.log(`${results.filter((r) => r.ok).length} checks passed${failed ? ", a scenario failed" : ""}; screenshots in ${OUT}`);
process.exit(failed ? 1 : 0);
