/**
 * A search, however started (the lens runs the server's kernelbrain.optimize directly), gets a
 * notification with its progress and Cancel, followed from the server's pushes, and when it
 * ends, what it found.
 */
import * as vscode from "vscode";
import type { JobBook } from "./common/jobs";
import type { ServerManager } from "./common/server";
import { formatSpeedup, type Job, type ServerState } from "./common/status";
import type { ResultsView } from "./results";

export function trackSearches(
  server: ServerManager,
  book: JobBook,
  results: ResultsView,
  serverState: () => ServerState,
): void {
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
          () => (serverState() === "error" || serverState() === "stopped" ? "the server stopped or lost the search" : undefined),
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
}
