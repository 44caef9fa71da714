import assert from "node:assert/strict";
import { test } from "node:test";
import { apiKeyProblem, Redactor, redacting } from "../../src/common/redact";
import { RestartBudget } from "../../src/common/restart";

const KEY = "kb-sentinel-9f8e7d6c5b4a";

function sink() {
  const lines: string[] = [];
  return {
    lines,
    append: (v: string) => lines.push(v),
    appendLine: (v: string) => lines.push(v),
    info: (v: string, ...rest: unknown[]) => lines.push([v, ...rest].join(" ")),
    error: (v: string) => lines.push(v),
    name: "test",
  };
}

test("the stored key never reaches a log line, in any form the client trace prints it", () => {
  const redactor = new Redactor();
  redactor.set(KEY);
  const s = sink();
  const log = redacting(s, redactor);
  log.appendLine(`[Trace] Sending request 'initialize' params: {"initializationOptions":{"llmApiKey":"${KEY}"}}`);
  log.append(JSON.stringify({ key: KEY }));
  log.info("handing over", { key: KEY });
  log.error(`failed with ${KEY}`);
  assert.equal(s.lines.length, 4);
  for (const line of s.lines) {
    assert.equal(line.includes(KEY), false, line);
    assert.match(line, /\[redacted\]/);
  }
  assert.equal(log.name, "test"); // everything else passes through
});

test("a replaced key is masked from then on, and key-shaped strings always", () => {
  const redactor = new Redactor();
  redactor.set(KEY);
  redactor.set("kb-second-key-000000", KEY);
  assert.equal(redactor.scrub(`x ${KEY}`), `x ${KEY}`); // forgotten: no longer the user's key
  assert.equal(redactor.scrub("kb-second-key-000000"), "[redacted]");
  assert.equal(redactor.scrub("OPENAI_API_KEY=sk-abcdefghijklmnop"), "OPENAI_API_KEY=[redacted]");
});

test("keys with spaces or too short are refused before they are stored", () => {
  assert.match(apiKeyProblem(" sk-abc12345") ?? "", /spaces/);
  assert.match(apiKeyProblem("abc") ?? "", /too short/);
  assert.equal(apiKeyProblem("sk-abcdefgh12345"), undefined);
});

test("a dying server is restarted at most `limit` times within the window", () => {
  let now = 0;
  const budget = new RestartBudget(2, () => now, 1000);
  assert.equal(budget.take(), true);
  assert.equal(budget.take(), true);
  assert.equal(budget.take(), false);
  now = 1500; // the window has passed
  assert.equal(budget.take(), true);
});
