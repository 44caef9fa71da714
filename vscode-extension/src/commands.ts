/**
 * The extension's commands: optimize at the cursor, cancel, show and preview variants, accept or
 * reject a preview, results, searches, harnesses, logs, restart, and the LLM key. Each command
 * that needs a kernel takes it from its arguments, else the cursor, else asks.
 */
import * as vscode from "vscode";
import type { JobBook } from "./common/jobs";
import type { Logs } from "./common/log";
import { apiKeyProblem } from "./common/redact";
import type { ServerManager } from "./common/server";
import { isActive, type ServerState } from "./common/status";
import type { Previews } from "./preview";
import type { ResultsView } from "./results";

export const SECRET = "kernelbrain.llmApiKey";

interface KernelInfo {
  name: string;
  span: { line: number; end_line: number };
}

export interface CommandParts {
  server: ServerManager;
  previews: Previews;
  results: ResultsView;
  book: JobBook;
  logs: Logs;
  serverState: () => ServerState;
}

export function registerCommands(context: vscode.ExtensionContext, parts: CommandParts): void {
  const { server, previews, results, book, serverState } = parts;
  const { log, redactor } = parts.logs;
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
        // the diff needs the width (code lines), the results view less: where the window holds
        // just these two groups, give the diff two thirds instead of half (a user's own layout
        // of more groups is left as it is)
        if (vscode.window.tabGroups.all.length === 2) {
          await vscode.commands.executeCommand("vscode.setEditorLayout", {
            orientation: 0,
            groups: [{ size: 0.66 }, { size: 0.34 }],
          });
        }
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
    if (serverState() === "error" || serverState() === "stopped") {
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
}
