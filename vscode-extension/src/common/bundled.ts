/**
 * `importStrategy: useBundled`: the kernelbrain wheel shipped in the .vsix (bundled/), installed on
 * first use into a private virtual environment in the extension's storage. The environment sees
 * the selected interpreter's site-packages (torch and triton are the user's, for their GPU), and
 * is rebuilt when the bundled wheel changes.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { promisify } from "node:util";
import * as vscode from "vscode";
import type { Interpreter } from "./python";

const run = promisify(execFile);

export function bundledWheel(extensionPath: string): string | undefined {
  const dir = path.join(extensionPath, "bundled");
  const wheel = existsSync(dir) ? readdirSync(dir).find((f) => f.endsWith(".whl")) : undefined;
  return wheel ? path.join(dir, wheel) : undefined;
}

export async function ensureBundled(
  context: vscode.ExtensionContext,
  base: Interpreter,
  log: vscode.LogOutputChannel,
): Promise<Interpreter> {
  const wheel = bundledWheel(context.extensionPath);
  if (!wheel) {
    throw new Error("this build of the extension carries no bundled kernelbrain wheel; use importStrategy fromEnvironment");
  }
  const root = context.globalStorageUri.fsPath;
  const venv = path.join(root, "venv");
  const python = path.join(venv, process.platform === "win32" ? "Scripts/python.exe" : "bin/python");
  const marker = path.join(venv, "kernelbrain-wheel.txt");
  if (existsSync(python) && existsSync(marker) && readFileSync(marker, "utf8") === path.basename(wheel)) {
    return { command: python, args: [], source: base.source };
  }
  mkdirSync(root, { recursive: true });
  await vscode.window.withProgress(
    {
      location: vscode.ProgressLocation.Notification,
      title: "KernelBrain: installing the bundled server",
    },
    async (progress) => {
      progress.report({ message: "creating a private environment…" });
      log.info(`creating ${venv} with ${base.command}`);
      await run(base.command, [...base.args, "-m", "venv", "--system-site-packages", "--clear", venv]);
      progress.report({ message: `installing ${path.basename(wheel)}…` });
      const { stdout, stderr } = await run(python, ["-m", "pip", "install", "--disable-pip-version-check", wheel], {
        maxBuffer: 16 << 20,
      });
      log.info(stdout + stderr);
      writeFileSync(marker, path.basename(wheel));
    },
  );
  return { command: python, args: [], source: base.source };
}
