/**
 * KernelBrain for VS Code: starts the language server (diagnostics, the ⚡ Optimize lens,
 * progress with Cancel, variant actions, hover) and adds what a generic client lacks: variant
 * previews with Accept/Reject, a results view, a status bar item for running searches, the LLM
 * key in secret storage, and workspace trust (restricted mode: static diagnostics only).
 */
import * as vscode from "vscode";
import { JobBook } from "./common/jobs";
import { createLogs } from "./common/log";
import { currentSettings, ServerManager } from "./common/server";
import { needsRestart } from "./common/settings";
import { type Job, type ServerState, statusText } from "./common/status";
import { registerCommands, SECRET } from "./commands";
import { Previews } from "./preview";
import { ResultsView } from "./results";
import { trackSearches } from "./tracking";


export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const logs = createLogs(context);
  const { log, redactor } = logs;
  redactor.set(await context.secrets.get(SECRET));
  const server = new ServerManager(context, logs, () => Promise.resolve(context.secrets.get(SECRET)));
  const previews = new Previews(server, log);
  const results = new ResultsView(context, server);
  const status = vscode.window.createStatusBarItem("kernelbrain.status", vscode.StatusBarAlignment.Left, 50);
  status.name = "KernelBrain";
  status.command = "kernelbrain.showJobs";
  context.subscriptions.push(server, previews, results, status);

  let serverState: ServerState = "starting";
  let serverError: string | undefined;
  const render = () => {
    const state = serverState === "running" && !vscode.workspace.isTrusted ? "restricted" : serverState;
    const s = statusText(state, book.list(), serverError);
    status.text = s.text;
    status.tooltip = s.tooltip;
    status.backgroundColor = s.error ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
    status.show();
  };
  server.onState((state, detail) => {
    serverState = state;
    serverError = detail;
    if (state === "running") {
      void relist();
    }
    book.poke(); // a follower of a job learns that the server stopped
    render();
  });

  // Searches: the server pushes every change of a job (kernelbrain/jobChanged); a listing is
  // asked for only when a server (re)starts, to learn what it holds.
  const book = new JobBook();
  book.onChange(() => render());
  server.onNotification("kernelbrain/jobChanged", (job: Job) => book.apply(job));
  const relist = async () => {
    try {
      const listing = await server.request<{ jobs: Job[] }>("kernelbrain/jobs", {});
      book.replaceAll(listing?.jobs ?? []);
    } catch (err) {
      log.warn(`kernelbrain/jobs: ${err}`);
    }
  };

  registerCommands(context, { server, previews, results, book, logs, serverState: () => serverState });
  trackSearches(server, book, results, () => serverState);

  // Settings: interpreter and import strategy need a new server; the rest reach it live.
  let settings = currentSettings(log);
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (!e.affectsConfiguration("kernelbrain")) {
        return;
      }
      const next = currentSettings(log);
      const restart = needsRestart(settings, next);
      settings = next;
      if (restart) {
        log.info("interpreter or import strategy changed: restarting the server");
        await server.restart();
      }
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(async () => {
      log.info("workspace trusted: restarting the server with trust on");
      await server.restart();
      render();
    }),
  );
  const pythonExt = vscode.extensions.getExtension("ms-python.python");
  if (pythonExt) {
    const api: any = pythonExt.isActive ? pythonExt.exports : await Promise.resolve(pythonExt.activate()).catch(() => undefined);
    const onChange = api?.environments?.onDidChangeActiveEnvironmentPath;
    if (onChange && settings.interpreter.length === 0) {
      context.subscriptions.push(
        onChange(() => {
          log.info("the Python extension's interpreter changed: restarting the server");
          void server.restart();
        }),
      );
    }
  }

  if (!vscode.workspace.isTrusted) {
    void vscode.window.showInformationMessage(
      "KernelBrain runs in restricted mode in this untrusted workspace: static diagnostics only, nothing of the workspace is imported or run, and there is no Optimize lens. Trust the workspace to optimize kernels.",
    );
  }
  render();
  await server.start();
}

export function deactivate(): Thenable<void> | undefined {
  return undefined;
}
