import assert from "node:assert/strict";
import { test } from "node:test";
import { initializationOptions, needsRestart, readSettings, SERVER_SETTINGS } from "../../src/common/settings";

const from = (values: Record<string, unknown>) => (key: string) => values[key];

test("unset settings take the defaults and every server setting is mirrored", () => {
  const { settings, problems } = readSettings(from({}));
  assert.deepEqual(problems, []);
  assert.deepEqual(Object.keys(settings.server).sort(), Object.keys(SERVER_SETTINGS).sort());
  assert.equal(settings.server.budget, "3m");
  assert.equal(settings.importStrategy, "fromEnvironment");
  assert.deepEqual(settings.interpreter, []);
});

test("values of the right type reach the server; wrong ones fall back with one message each", () => {
  const { settings, problems } = readSettings(
    from({ budget: " 40s ", maxCandidates: 0, llm: "yes", llmModel: "gpt-x", memory: false, targetArch: 80 }),
  );
  assert.equal(settings.server.budget, "40s");
  assert.equal(settings.server.maxCandidates, 60);
  assert.equal(settings.server.llm, false);
  assert.equal(settings.server.llmModel, "gpt-x");
  assert.equal(settings.server.memory, false);
  assert.equal(settings.server.targetArch, 80);
  assert.equal(problems.length, 2);
  assert.match(problems.join("\n"), /kernelbrain\.maxCandidates = 0 is invalid; using 60/);
  assert.match(problems.join("\n"), /kernelbrain\.llm = "yes" is invalid; using false/);
});

test("the interpreter takes a string or an array; garbage is reported", () => {
  assert.deepEqual(readSettings(from({ interpreter: "/opt/py/bin/python" })).settings.interpreter, ["/opt/py/bin/python"]);
  assert.deepEqual(readSettings(from({ interpreter: ["uv", "run", "python"] })).settings.interpreter, ["uv", "run", "python"]);
  const bad = readSettings(from({ interpreter: 3, importStrategy: "fromPyPI" }));
  assert.deepEqual(bad.settings.interpreter, []);
  assert.equal(bad.settings.importStrategy, "fromEnvironment");
  assert.equal(bad.problems.length, 2);
});

test("only interpreter and import strategy changes restart the server", () => {
  const a = readSettings(from({})).settings;
  assert.equal(needsRestart(a, readSettings(from({ budget: "10m" })).settings), false);
  assert.equal(needsRestart(a, readSettings(from({ interpreter: ["python3.12"] })).settings), true);
  assert.equal(needsRestart(a, readSettings(from({ importStrategy: "useBundled" })).settings), true);
});

test("initialization options carry the settings, the trust, and the key only when there is one", () => {
  const s = readSettings(from({})).settings;
  const without = initializationOptions(s, false, undefined);
  assert.equal(without.workspaceTrusted, false);
  assert.equal("llmApiKey" in without, false);
  assert.deepEqual(without.kernelbrain, s.server);
  assert.equal(initializationOptions(s, true, "sk-test-123456789").llmApiKey, "sk-test-123456789");
  // the key never becomes a setting
  assert.equal(JSON.stringify(s).includes("sk-test"), false);
});
