/**
 * The extension's settings, typed: what the extension itself uses (interpreter, import
 * strategy, restart limit) and the section mirrored to the server (`kernelbrain` in
 * workspace/configuration and the initialization options). A value of the wrong type falls back
 * to its default with one message, so a typo in settings.json never starts a server on garbage.
 * Free of `vscode`: unit-tested in plain node.
 */

export type ImportStrategy = "fromEnvironment" | "useBundled";

type Kind = "boolean" | "integer" | "number" | "string" | "nullableString" | "nullableBoolean";

/** The server's settings (server/editor_settings.py), with the extension's defaults. */
export const SERVER_SETTINGS: Record<string, { kind: Kind; default: unknown; min?: number }> = {
  debounceMs: { kind: "integer", default: 200, min: 0 },
  workspaceDiagnostics: { kind: "boolean", default: true },
  compiledView: { kind: "boolean", default: true },
  targetArch: { kind: "integer", default: 90, min: 70 },
  harnessHints: { kind: "boolean", default: true },
  budget: { kind: "string", default: "3m" },
  maxCandidates: { kind: "integer", default: 60, min: 1 },
  device: { kind: "string", default: "auto" },
  llm: { kind: "boolean", default: false },
  llmEndpoint: { kind: "nullableString", default: null },
  llmModel: { kind: "nullableString", default: null },
  llmMaxTokens: { kind: "integer", default: 200000, min: 0 },
  llmMaxDollars: { kind: "number", default: 0.5, min: 0 },
  llmTemperature: { kind: "number", default: 0.7, min: 0 },
  llmConcurrency: { kind: "integer", default: 2, min: 1 },
  llmTimeout: { kind: "number", default: 90, min: 1 },
  llmMaxRepairs: { kind: "integer", default: 2, min: 0 },
  memory: { kind: "nullableBoolean", default: null },
};

export interface Settings {
  interpreter: string[];
  importStrategy: ImportStrategy;
  serverRestartLimit: number;
  /** Mirrored to the server's `kernelbrain` section. */
  server: Record<string, unknown>;
}

export type Getter = (key: string) => unknown;

function fits(kind: Kind, value: unknown, min?: number): boolean {
  switch (kind) {
    case "boolean":
      return typeof value === "boolean";
    case "nullableBoolean":
      return value === null || typeof value === "boolean";
    case "string":
      return typeof value === "string" && value.trim() !== "";
    case "nullableString":
      return value === null || (typeof value === "string" && value.trim() !== "");
    case "integer":
      return Number.isInteger(value) && (min === undefined || (value as number) >= min);
    case "number":
      return typeof value === "number" && Number.isFinite(value) && (min === undefined || value >= min);
  }
}

/** Read every setting through `get` (undefined: not set); return them and one message per bad one. */
export function readSettings(get: Getter): { settings: Settings; problems: string[] } {
  const problems: string[] = [];
  const server: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(SERVER_SETTINGS)) {
    const value = get(key);
    if (value === undefined) {
      server[key] = spec.default;
    } else if (fits(spec.kind, value, spec.min)) {
      server[key] = typeof value === "string" ? value.trim() : value;
    } else {
      server[key] = spec.default;
      problems.push(`kernelbrain.${key} = ${JSON.stringify(value)} is invalid; using ${JSON.stringify(spec.default)}`);
    }
  }
  let interpreter: string[] = [];
  const rawInterpreter = get("interpreter");
  if (typeof rawInterpreter === "string" && rawInterpreter.trim()) {
    interpreter = [rawInterpreter.trim()];
  } else if (Array.isArray(rawInterpreter) && rawInterpreter.every((s) => typeof s === "string")) {
    interpreter = rawInterpreter.filter((s) => s.trim() !== "");
  } else if (rawInterpreter !== undefined && rawInterpreter !== null && !(Array.isArray(rawInterpreter) && rawInterpreter.length === 0)) {
    problems.push(`kernelbrain.interpreter = ${JSON.stringify(rawInterpreter)} is invalid; using the Python extension's interpreter or python3`);
  }
  let importStrategy: ImportStrategy = "fromEnvironment";
  const rawStrategy = get("importStrategy");
  if (rawStrategy === "useBundled" || rawStrategy === "fromEnvironment") {
    importStrategy = rawStrategy;
  } else if (rawStrategy !== undefined) {
    problems.push(`kernelbrain.importStrategy = ${JSON.stringify(rawStrategy)} is invalid; using "fromEnvironment"`);
  }
  let serverRestartLimit = 3;
  const rawLimit = get("serverRestartLimit");
  if (Number.isInteger(rawLimit) && (rawLimit as number) >= 0) {
    serverRestartLimit = rawLimit as number;
  } else if (rawLimit !== undefined) {
    problems.push(`kernelbrain.serverRestartLimit = ${JSON.stringify(rawLimit)} is invalid; using 3`);
  }
  return { settings: { interpreter, importStrategy, serverRestartLimit, server }, problems };
}

/** Settings whose change needs a new server process (the others reach it live). */
export function needsRestart(before: Settings, after: Settings): boolean {
  return (
    before.importStrategy !== after.importStrategy ||
    JSON.stringify(before.interpreter) !== JSON.stringify(after.interpreter)
  );
}

/**
 * The server's initialization options: its settings, the editor's workspace trust (which wins
 * over any setting), and the LLM key when one is stored. They travel only on the server's stdin.
 */
export function initializationOptions(
  settings: Settings,
  workspaceTrusted: boolean,
  apiKey: string | undefined,
): Record<string, unknown> {
  const options: Record<string, unknown> = { kernelbrain: settings.server, workspaceTrusted };
  if (apiKey) {
    options.llmApiKey = apiKey;
  }
  return options;
}
