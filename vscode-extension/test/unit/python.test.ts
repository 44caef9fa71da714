import assert from "node:assert/strict";
import { test } from "node:test";
import { describeInterpreter, installCommand, resolveInterpreter } from "../../src/common/python";

test("an explicit kernelbrain.interpreter wins, with its arguments", async () => {
  let asked = false;
  const i = await resolveInterpreter({
    setting: ["/venv/bin/python", "-X", "utf8"],
    pythonExtension: async () => {
      asked = true;
      return "/other/python";
    },
  });
  assert.deepEqual(i, { command: "/venv/bin/python", args: ["-X", "utf8"], source: "setting" });
  assert.equal(asked, false);
});

test("else the Python extension's interpreter", async () => {
  const i = await resolveInterpreter({ setting: [], pythonExtension: async () => "/conda/bin/python" });
  assert.deepEqual(i, { command: "/conda/bin/python", args: [], source: "python-extension" });
});

test("else python3, also when the Python extension has none or fails", async () => {
  for (const pythonExtension of [undefined, async () => undefined, async () => Promise.reject(new Error("boom"))]) {
    const i = await resolveInterpreter({ setting: [], pythonExtension });
    assert.deepEqual(i, { command: "python3", args: [], source: "default" });
  }
});

test("messages name the interpreter, why it was chosen, and the one fixing command", () => {
  const i = { command: "/venv/bin/python", args: [], source: "python-extension" as const };
  assert.match(describeInterpreter(i), /\/venv\/bin\/python \(selected in the Python extension\)/);
  assert.equal(installCommand(i, ["torch", "triton"]), "/venv/bin/python -m pip install torch triton");
});
