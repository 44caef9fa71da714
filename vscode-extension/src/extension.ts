/**
 * KernelBrain for VS Code: starts the language server (diagnostics, the ⚡ Optimize lens,
 * progress with Cancel, variant actions, hover) and adds what a generic client lacks: variant
 * previews with Accept/Reject, a results view, a status bar item for running searches, the LLM
 * key in secret storage, and workspace trust (restricted mode: static diagnostics only).
 */
import * as vscode from "vscode";
import { JobBook } from "./common/jobs";
import { createLogs } from "./common/log";
import { apiKeyProblem } from "./common/redact";
import { currentSettings, ServerManager } from "./common/server";
import { needsRestart } from "./common/settings";
import { formatSpeedup, isActive, type Job, type ServerState, statusText } from "./common/status";
import { Previews } from "./preview";
import { ResultsView } from "./results";

const SECRET = "kernelbrain.llmApiKey";

interface KernelInfo {
  name: string;
  span: { line: number; end_line: number };
}

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

  const activeFile = (): vscode.TextEditor | undefined => {
    const editor = vscode.window.activeTextEditor;
    return editor && editor.document.uri.scheme === "file" ? editor : undefined;
  };
  const kernelsOf = async (uri: string): Promise<KernelInfo[]> => {
    const listing = await server.request<{ files: { uri: string; kernels: KernelInfo[] }[] }>("kernelbrain/kernels", {
      uri,
    });
    return listing?.files.find((f) => f.uri === uri)?.kernels ?? [];
  };
  /** The kernel under the cursor, else the file's only kernel, else one the user picks. */
  const pickKernel = async (editor: vscode.TextEditor): Promise<string | undefined> => {
    const kernels = await kernelsOf(editor.document.uri.toString());
    const line = editor.selection.active.line;
    const here = kernels.find((k) => k.span.line <= line && line <= k.span.end_line);
    if (here || kernels.length === 1) {
      return (here ?? kernels[0]).name;
    }
    if (kernels.length === 0) {
      void vscode.window.showInformationMessage("KernelBrain: no Triton kernel in this file.");
      return undefined;
    }
    return vscode.window.showQuickPick(
      kernels.map((k) => k.name),
      { placeHolder: "Which kernel?" },
    );
  };

  const optimize = async (uri: string, kernel: string) => {
    if (!vscode.workspace.isTrusted) {
      void vscode.window.showWarningMessage("KernelBrain optimizes only in a trusted workspace: a search runs the workspace's code.");
      return;
    }
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri);
    if (doc?.isDirty) {
      await doc.save(); // the search runs the file as saved
    }
    const started = await vscode.commands.executeCommand<{ started: boolean; message?: string }>(
      "kernelbrain.optimize",
      uri,
      kernel,
    );
    if (started && !started.started && started.message) {
      log.warn(started.message);
    }
  };

  const variantsOf = async (uri: string, kernel: string) => {
    const r = await server.request<any>("kernelbrain/results", { uri, kernel });
    return r?.found ? (r.variants as any[]).filter((v) => v.offered && !v.stale) : [];
  };
  const pickVariant = async (uri: string, kernel: string): Promise<string | undefined> => {
    const variants = await variantsOf(uri, kernel);
    if (variants.length === 0) {
      void vscode.window.showInformationMessage(`KernelBrain: no verified variant of ${kernel} to show. Run Optimize first.`);
      return undefined;
    }
    const picked = await vscode.window.showQuickPick(
      variants.map((v) => ({
        label: `${v.speedup.toFixed(2)}× ${v.title}`,
        description: `${v.measured ? "measured" : "estimated"} · ${v.perCase.length} cases${v.llm ? " · LLM" : ""}`,
        detail: v.origin,
        id: v.id as string,
      })),
      { placeHolder: `Variants of ${kernel}` },
    );
    return picked?.id;
  };
  const withKernel = async (
    args: unknown[],
    then: (uri: string, kernel: string, rest: unknown[]) => Promise<unknown>,
  ) => {
    if (typeof args[0] === "string" && typeof args[1] === "string") {
      return then(args[0], args[1], args.slice(2));
    }
    const editor = activeFile();
    if (!editor) {
      void vscode.window.showInformationMessage("KernelBrain: open a kernel file first.");
      return undefined;
    }
    const kernel = await pickKernel(editor);
    return kernel ? then(editor.document.uri.toString(), kernel, []) : undefined;
  };

  const register = (id: string, fn: (...args: any[]) => unknown) =>
    context.subscriptions.push(vscode.commands.registerCommand(id, fn));

  register("kernelbrain.optimizeAtCursor", (...args: unknown[]) => withKernel(args, optimize));
  register("kernelbrain.cancelSearch", async (jobId?: string) => {
    const running = book.list().filter(isActive);
    const id =
      typeof jobId === "string"
        ? jobId
        : running.length === 1
          ? running[0].id
          : (
              await vscode.window.showQuickPick(
                running.map((j) => ({ label: j.kernel, description: j.state, id: j.id })),
                { placeHolder: running.length ? "Cancel which search?" : "No search is running" },
              )
            )?.id;
    if (id) {
      await vscode.commands.executeCommand("kernelbrain.cancel", id);
    }
  });
  register("kernelbrain.showVariants", (...args: unknown[]) =>
    withKernel(args, async (uri, kernel) => {
      const id = await pickVariant(uri, kernel);
      return id ? vscode.commands.executeCommand("kernelbrain.previewVariant", uri, kernel, id) : undefined;
    }),
  );
  register("kernelbrain.previewVariant", (...args: unknown[]) =>
    withKernel(args, async (uri, kernel, rest) => {
      const id = typeof rest[0] === "string" ? rest[0] : await pickVariant(uri, kernel);
      if (!id) {
        return undefined;
      }
      const preview = await previews.open(uri, kernel, id);
      if (preview) {
        await results.show(uri, kernel, id, vscode.ViewColumn.Beside);
      }
      return preview !== undefined;
    }),
  );
  register("kernelbrain.acceptVariant", () => previews.accept());
  register("kernelbrain.rejectVariant", () => previews.reject());
  register("kernelbrain.showResults", (...args: unknown[]) =>
    withKernel(args, (uri, kernel) => results.show(uri, kernel, undefined, vscode.ViewColumn.Active)),
  );
  register("kernelbrain.showJobs", async () => {
    if (serverState === "error" || serverState === "stopped") {
      log.show();
      return;
    }
    const items = book.list().map((j) => ({
      label: `${j.kernel}`,
      description: `${j.state}${j.best_speedup ? ` · best ${j.best_speedup.toFixed(2)}×${j.measured ? "" : " (est.)"}` : ""}`,
      detail: j.message,
      job: j,
    }));
    const picked = await vscode.window.showQuickPick(items, {
      placeHolder: items.length ? "Searches this session (pick one to see its results)" : "No search yet",
    });
    const uri = picked ? (picked.job as any).uri : undefined;
    if (picked && typeof uri === "string") {
      await results.show(uri, picked.job.kernel, undefined, vscode.ViewColumn.Active);
    }
  });
  register("kernelbrain.scaffoldHarness", (...args: unknown[]) =>
    withKernel(args, async (uri, kernel) => vscode.commands.executeCommand("kernelbrain.initHarness", uri, kernel)),
  );
  register("kernelbrain.draftHarnessWithLLM", (...args: unknown[]) =>
    withKernel(args, async (uri, kernel) => vscode.commands.executeCommand("kernelbrain.draftHarness", uri, kernel)),
  );
  register("kernelbrain.showLogs", () => log.show());
  register("kernelbrain.restartServer", () => server.restart());
  register("kernelbrain.setApiKey", async () => {
    const key = await vscode.window.showInputBox({
      title: "KernelBrain: LLM API key",
      prompt: "Stored in VS Code's secret storage and handed to the KernelBrain server; empty to forget it.",
      password: true,
      ignoreFocusOut: true,
      validateInput: (v) => (v === "" ? undefined : apiKeyProblem(v)),
    });
    if (key === undefined) {
      return;
    }
    const previous = await context.secrets.get(SECRET);
    if (key === "") {
      await context.secrets.delete(SECRET);
    } else {
      redactor.set(key, previous);
      await context.secrets.store(SECRET, key);
    }
    const answer = await server.request<{ stored: boolean }>("kernelbrain/setApiKey", { key: key || null });
    log.info(key ? "LLM key stored and handed to the server" : "LLM key forgotten");
    void vscode.window.showInformationMessage(
      key ? `KernelBrain: key stored${answer?.stored ? " and in use" : " (used when the server starts)"}.` : "KernelBrain: key forgotten.",
    );
  });

  // A search, however started (the lens runs the server's kernelbrain.optimize directly), gets a
  // notification with its progress and Cancel, and when it ends, what it found.
  const tracked = new Set<string>();
  const track = (jobId: string, uri: string, kernel: string) => {
    if (tracked.has(jobId)) {
      return;
    }
    tracked.add(jobId);
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Optimizing ${kernel}`, cancellable: true },
      async (progress, token) => {
        token.onCancellationRequested(() => void vscode.commands.executeCommand("kernelbrain.cancel", jobId));
        let done = 0;
        return book.follow(
          jobId,
          (job) => {
            const pct = Math.round((job.fraction ?? 0) * 100);
            progress.report({
              increment: Math.max(0, pct - done),
              message: `${job.state === "queued" ? "queued" : `${pct}%`} · ${formatSpeedup(job.best_speedup, job.measured)}`,
            });
            done = Math.max(done, pct);
          },
          () => (serverState === "error" || serverState === "stopped" ? "the server stopped or lost the search" : undefined),
        );
      },
    ).then(async (job) => {
      tracked.delete(jobId);
      if (job.state !== "finished") {
        void vscode.window.showWarningMessage(`KernelBrain: the search of ${kernel} ${job.state}${job.error ? `: ${job.error}` : ""}.`);
        return;
      }
      if (job.best_speedup && job.best_speedup > 1) {
        const choice = await vscode.window.showInformationMessage(
          `KernelBrain: ${kernel} ${formatSpeedup(job.best_speedup, job.measured)}.`,
          "Preview Variant",
          "Show Results",
        );
        if (choice === "Preview Variant") {
          await vscode.commands.executeCommand("kernelbrain.previewVariant", uri, kernel, job.best_id ?? undefined);
        } else if (choice === "Show Results") {
          await results.show(uri, kernel, undefined, vscode.ViewColumn.Beside);
        }
      } else {
        void vscode.window.showInformationMessage(`KernelBrain: no faster variant of ${kernel} (${job.message || "search finished"}).`);
      }
    });
  };
  server.onCommand((command, args, result: any) => {
    if (command === "kernelbrain.optimize" && result?.started && typeof result.job === "string") {
      track(result.job, String(args[0]), String(args[1]));
    }
  });

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
