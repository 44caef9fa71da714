/**
 * Which Python runs the server. An explicit `kernelbrain.interpreter` is the user's word and
 * wins; else the Python extension's interpreter for the workspace (when that extension is
 * installed); else `python3` on PATH. Free of `vscode`: the Python extension is reached through
 * an injected lookup.
 */

export interface Interpreter {
  command: string;
  args: string[];
  source: "setting" | "python-extension" | "default";
}

export interface InterpreterSources {
  /** `kernelbrain.interpreter`: the executable and any arguments (empty: not set). */
  setting: string[];
  /** The Python extension's active interpreter for the workspace, when that extension is installed. */
  pythonExtension?: () => Promise<string | undefined>;
}

export async function resolveInterpreter(sources: InterpreterSources): Promise<Interpreter> {
  if (sources.setting.length > 0) {
    const [command, ...args] = sources.setting;
    return { command, args, source: "setting" };
  }
  if (sources.pythonExtension) {
    try {
      const path = await sources.pythonExtension();
      if (path) {
        return { command: path, args: [], source: "python-extension" };
      }
    } catch {
      // The Python extension failed to answer: fall through to python3.
    }
  }
  return { command: "python3", args: [], source: "default" };
}

/** A sentence for the log and for error messages: which interpreter and why it was chosen. */
export function describeInterpreter(i: Interpreter): string {
  const why = {
    setting: "from kernelbrain.interpreter",
    "python-extension": "selected in the Python extension",
    default: "python3 on PATH (set kernelbrain.interpreter or select one in the Python extension)",
  }[i.source];
  return `${[i.command, ...i.args].join(" ")} (${why})`;
}

/**
 * The one command that installs what the server needs in this interpreter, for the message shown
 * when `kernelbrain`, torch or triton is missing.
 */
export function installCommand(i: Interpreter, missing: string[]): string {
  const packages = missing.map((m) => (m === "kernelbrain" ? "kernelbrain" : m));
  return `${[i.command, ...i.args].join(" ")} -m pip install ${packages.join(" ")}`;
}
