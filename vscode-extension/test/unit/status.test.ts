import assert from "node:assert/strict";
import { test } from "node:test";
import { statusText } from "../../src/common/status";

test("idle, restricted, starting and error states", () => {
  assert.match(statusText("running", []).text, /\$\(zap\) KernelBrain/);
  assert.match(statusText("restricted", []).tooltip, /Trust this workspace/);
  assert.match(statusText("starting", []).text, /loading~spin/);
  const err = statusText("error", [], "no kernelbrain package");
  assert.equal(err.error, true);
  assert.equal(err.tooltip, "no kernelbrain package");
});

test("running searches show the first kernel with its progress and best so far, estimates marked", () => {
  const s = statusText("running", [
    { id: "a", kernel: "softmax_kernel", state: "running", fraction: 0.42, best_speedup: 1.318, measured: false },
    { id: "b", kernel: "gelu_kernel", state: "queued" },
    { id: "c", kernel: "old_kernel", state: "finished", best_speedup: 2 },
  ]);
  assert.equal(s.text, "$(sync~spin) softmax_kernel 42% · best 1.32× (est.) +1");
  assert.match(s.tooltip, /softmax_kernel: 42%, best 1\.32× \(est\.\)/);
  assert.match(s.tooltip, /gelu_kernel: queued, no faster variant yet/);
  assert.doesNotMatch(s.tooltip, /old_kernel/);
  const measured = statusText("running", [{ id: "a", kernel: "k", state: "running", best_speedup: 1.5, measured: true }]);
  assert.equal(measured.text, "$(sync~spin) k 0% · best 1.50×");
  const waiting = statusText("running", [{ id: "a", kernel: "k", state: "queued" }]);
  assert.equal(waiting.text, "$(sync~spin) k queued");
});
