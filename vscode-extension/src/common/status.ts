/**
 * What the status bar item says: idle, the searches running with their best so far, or an error.
 * Free of `vscode`: the item itself lives in extension.ts.
 */

export interface Job {
  id: string;
  kernel: string;
  state: string; // queued | running | finished | cancelled | failed
  fraction?: number;
  best_speedup?: number | null;
  measured?: boolean;
  message?: string;
  best_id?: string | null;
  error?: string | null;
  uri?: string;
}

export type ServerState = "starting" | "running" | "stopped" | "error" | "restricted";

export interface Status {
  text: string;
  tooltip: string;
  error: boolean;
}

export function formatSpeedup(speedup: number | null | undefined, measured: boolean | undefined): string {
  if (speedup === null || speedup === undefined) {
    return "no faster variant yet";
  }
  return `best ${speedup.toFixed(2)}×${measured ? "" : " (est.)"}`;
}

export function isActive(job: Job): boolean {
  return job.state === "queued" || job.state === "running";
}

export function statusText(server: ServerState, jobs: Job[], error?: string): Status {
  if (server === "error" || server === "stopped") {
    return {
      text: "$(error) KernelBrain",
      tooltip: error ?? "The KernelBrain server is not running. Click for the logs.",
      error: true,
    };
  }
  if (server === "starting") {
    return { text: "$(loading~spin) KernelBrain", tooltip: "Starting the KernelBrain server…", error: false };
  }
  const active = jobs.filter(isActive);
  if (active.length === 0) {
    const restricted = server === "restricted";
    return {
      text: restricted ? "$(shield) KernelBrain" : "$(zap) KernelBrain",
      tooltip: restricted
        ? "Restricted mode: static diagnostics only. Trust this workspace to optimize kernels."
        : "KernelBrain: idle. Click to show searches.",
      error: false,
    };
  }
  const lines = active.map((j) => {
    const pct = j.state === "queued" ? "queued" : `${Math.round((j.fraction ?? 0) * 100)}%`;
    return `${j.kernel}: ${pct}, ${formatSpeedup(j.best_speedup, j.measured)}`;
  });
  const first = active[0];
  const more = active.length > 1 ? ` +${active.length - 1}` : "";
  const progress = first.state === "queued" ? " queued" : ` ${Math.round((first.fraction ?? 0) * 100)}%`;
  const best =
    first.best_speedup !== null && first.best_speedup !== undefined
      ? ` · best ${first.best_speedup.toFixed(2)}×${first.measured ? "" : " (est.)"}`
      : "";
  return {
    text: `$(sync~spin) ${first.kernel}${progress}${best}${more}`,
    tooltip: `KernelBrain searches (click to show):\n${lines.join("\n")}`,
    error: false,
  };
}
