/**
 * The server's lifecycle: resolve the interpreter (or install the bundled server), check that it
 * can run KernelBrain, start `python -m kernelbrain.server` over stdio with the settings and the
 * workspace trust, restart it on interpreter or setting changes and when it dies (within a
 * limit), and stop it.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import * as vscode from "vscode";
import {
  CloseAction,
  ErrorAction,
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
  State,
  TransportKind,
} from "vscode-languageclient/node";
import { ensureBundled } from "./bundled";
import type { Logs } from "./log";
import { describeInterpreter, installCommand, type Interpreter, resolveInterpreter } from "./python";
import { RestartBudget } from "./restart";
import { initializationOptions, readSettings, type Settings } from "./settings";

const run = promisify(execFile);

export function currentSettings(log?: vscode.LogOutputChannel): Settings {
  // `get` (not `inspect`): in an untrusted workspace VS Code ignores the workspace's values of
  // the restricted settings (package.json: the interpreter, the import strategy), so a cloned
  // repository's .vscode/settings.json cannot choose the program the extension runs.
  const config = vscode.workspace.getConfiguration("kernelbrain");
  const { settings, problems } = readSettings((key) => config.get(key));
  for (const p of problems) {
    log?.warn(p);
  }
  return settings;
}

async function pythonExtensionInterpreter(): Promise<string | undefined> {
  const ext = vscode.extensions.getExtension("ms-python.python");
  if (!ext) {
    return undefined;
  }
  const api: any = ext.isActive ? ext.exports : await ext.activate();
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
  const active = api?.environments?.getActiveEnvironmentPath?.(folder);
  if (!active) {
    return undefined;
  }
  const resolved = await api.environments.resolveEnvironment?.(active);
  return resolved?.executable?.uri?.fsPath ?? active.path;
}

/** Which of kernelbrain, torch and triton the interpreter lacks. */
async function missingModules(i: Interpreter): Promise<string[]> {
  const probe =
    "import importlib.util as u, json; print(json.dumps([m for m in ('kernelbrain.server', 'torch', 'triton') if u.find_spec(m.split('.')[0]) is None or (m == 'kernelbrain.server' and u.find_spec(m) is None)]))";
  const { stdout } = await run(i.command, [...i.args, "-c", probe], { timeout: 60_000 });
  return (JSON.parse(stdout.trim()) as string[]).map((m) => m.split(".")[0]);
}

export class ServerManager implements vscode.Disposable {
  client: LanguageClient | undefined;
  interpreter: Interpreter | undefined;
  private budget: RestartBudget;
  private warnedMissing = new Set<string>();
  private readonly stateListeners: ((state: "starting" | "running" | "stopped" | "error", detail?: string) => void)[] = [];
  private starting: Promise<void> | undefined;
  private readonly commandListeners: ((command: string, args: unknown[], result: unknown) => void)[] = [];
  private readonly notificationListeners: [string, (params: any) => void][] = [];

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly logs: Logs,
    private readonly apiKey: () => Promise<string | undefined>,
  ) {
    this.budget = new RestartBudget(currentSettings().serverRestartLimit);
  }

  onState(listener: (state: "starting" | "running" | "stopped" | "error", detail?: string) => void): void {
    this.stateListeners.push(listener);
  }

  /** Called after every server command the editor runs (the lens's Optimize included). */
  onCommand(listener: (command: string, args: unknown[], result: unknown) => void): void {
    this.commandListeners.push(listener);
  }

  /** A notification the server pushes (registered again on every server this manager starts). */
  onNotification(method: string, listener: (params: any) => void): void {
    this.notificationListeners.push([method, listener]);
    this.client?.onNotification(method, listener);
  }

  private emit(state: "starting" | "running" | "stopped" | "error", detail?: string): void {
    for (const l of this.stateListeners) {
      l(state, detail);
    }
  }

  async start(): Promise<void> {
    if (!this.starting) {
      this.starting = this.doStart().finally(() => (this.starting = undefined));
    }
    return this.starting;
  }

  private async doStart(): Promise<void> {
    const { log, trace } = this.logs;
    const settings = currentSettings(log);
    this.budget = new RestartBudget(settings.serverRestartLimit);
    this.emit("starting");
    let interpreter = await resolveInterpreter({
      setting: settings.interpreter,
      pythonExtension: pythonExtensionInterpreter,
    });
    log.info(`interpreter: ${describeInterpreter(interpreter)}`);
    try {
      if (settings.importStrategy === "useBundled") {
        interpreter = await ensureBundled(this.context, interpreter, log);
      }
      const missing = await missingModules(interpreter);
      if (missing.includes("kernelbrain")) {
        const msg =
          `KernelBrain: ${describeInterpreter(interpreter)} has no kernelbrain package. Install it with ` +
          `\`${installCommand(interpreter, ["kernelbrain"])}\`, or set kernelbrain.importStrategy to useBundled.`;
        log.error(msg);
        this.emit("error", msg);
        void vscode.window.showErrorMessage(msg, "Show Logs").then((a) => a && log.show());
        return;
      }
      const gpuStack = missing.filter((m) => m === "torch" || m === "triton");
      const key = gpuStack.join(",") + interpreter.command;
      if (gpuStack.length && !this.warnedMissing.has(key)) {
        this.warnedMissing.add(key);
        void vscode.window.showWarningMessage(
          `KernelBrain: ${interpreter.command} lacks ${gpuStack.join(" and ")}: diagnostics work, ` +
            `searches do not. Fix: \`${installCommand(interpreter, gpuStack)}\``,
        );
      }
    } catch (err) {
      const msg = `KernelBrain could not run ${describeInterpreter(interpreter)}: ${err instanceof Error ? err.message : err}`;
      log.error(msg);
      this.emit("error", msg);
      void vscode.window.showErrorMessage(msg, "Show Logs").then((a) => a && log.show());
      return;
    }
    this.interpreter = interpreter;
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const serverOptions: ServerOptions = {
      command: interpreter.command,
      args: [...interpreter.args, "-m", "kernelbrain.server"],
      transport: TransportKind.stdio,
      options: { cwd, env: { ...process.env, PYTHONUNBUFFERED: "1" } },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: "file", language: "python" }],
      outputChannel: log,
      traceOutputChannel: trace,
      initializationOptions: initializationOptions(
        settings,
        vscode.workspace.isTrusted,
        await this.apiKey(),
      ),
      synchronize: { configurationSection: "kernelbrain" },
      middleware: {
        executeCommand: async (command, args, next) => {
          const result = await next(command, args);
          for (const l of this.commandListeners) {
            l(command, args, result);
          }
          return result;
        },
        workspace: {
          // the server pulls its section: answer with the typed settings, not the raw ones
          configuration: async (params, token, next) => {
            const raw = await next(params, token);
            if (!Array.isArray(raw)) {
              return raw;
            }
            return params.items.map((item, i) =>
              item.section === "kernelbrain" ? currentSettings().server : raw[i],
            );
          },
        },
      },
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue }),
        closed: () => {
          if (this.budget.take()) {
            log.warn("the server stopped; restarting it");
            return { action: CloseAction.Restart };
          }
          const msg = `The KernelBrain server stopped ${settings.serverRestartLimit + 1} times in 3 minutes; not restarting it. See the logs, then run KernelBrain: Restart Server.`;
          this.emit("error", msg);
          void vscode.window.showErrorMessage(msg, "Show Logs").then((a) => a && log.show());
          return { action: CloseAction.DoNotRestart };
        },
      },
    };
    const client = new LanguageClient("kernelbrain", "KernelBrain", serverOptions, clientOptions);
    for (const [method, listener] of this.notificationListeners) {
      client.onNotification(method, listener);
    }
    client.onDidChangeState((e) => {
      if (e.newState === State.Running) {
        this.emit("running");
      } else if (e.newState === State.Stopped) {
        this.emit("stopped");
      }
    });
    this.client = client;
    try {
      await client.start();
    } catch (err) {
      const msg = `KernelBrain: the server failed to start: ${err instanceof Error ? err.message : err}`;
      log.error(msg);
      this.emit("error", msg);
    }
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.stop(5000);
      } catch (err) {
        this.logs.log.warn(`stopping the server: ${err}`);
      }
    }
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** A request to the running server; undefined when none runs. */
  async request<T>(method: string, params: unknown): Promise<T | undefined> {
    if (!this.client || this.client.state !== State.Running) {
      return undefined;
    }
    return this.client.sendRequest<T>(method, params);
  }

  dispose(): void {
    void this.stop();
  }
}
