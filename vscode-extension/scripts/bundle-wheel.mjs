// Builds the project's wheel into bundled/ for `importStrategy: useBundled` (shipped in the .vsix).
// The Python that builds it: $PYTHON, else the repository's .venv, else python3.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import * as path from "node:path";

const repo = path.resolve(import.meta.dirname, "..", "..");
const venvPython = path.join(repo, ".venv", "bin", "python");
const python = process.env.PYTHON || (existsSync(venvPython) ? venvPython : "python3");
const out = path.resolve(import.meta.dirname, "..", "bundled");
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
execFileSync(
  python,
  ["-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps", "--no-build-isolation", "-w", out, repo],
  { stdio: "inherit" },
);
console.log(`bundled: ${readdirSync(out).join(", ")}`);
