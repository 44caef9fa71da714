// The results view's page: renders what the extension posts (kernelbrain/results and the shown
// variant's kernelbrain/variant) with chart.js, in the colours of the current VS Code theme.
import {
  Chart,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  ScatterController,
  Tooltip,
} from "chart.js";

Chart.register(LineController, ScatterController, LineElement, PointElement, LinearScale, Tooltip, Legend);

declare function acquireVsCodeApi(): { postMessage(msg: unknown): void };
const vscode = acquireVsCodeApi();
let chart: Chart | undefined;

function esc(s: unknown): string {
  return String(s ?? "").replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function themeColor(name: string, fallback: string): string {
  return getComputedStyle(document.body).getPropertyValue(name).trim() || fallback;
}

function counts(title: string, table: Record<string, number>): string {
  const rows = Object.entries(table ?? {})
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `<tr><td>${esc(k)}</td><td class="num">${v}</td></tr>`)
    .join("");
  return `<table><tr><th>${esc(title)}</th><th>candidates</th></tr>${rows}</table>`;
}

function render(results: any, variant: any): void {
  const root = document.getElementById("root")!;
  const measured = results.measured;
  const best = results.variants.find((v: any) => v.id === results.best);
  const shown = variant ?? null;
  const estimate = measured ? "" : ' <span class="est">(estimates: no GPU)</span>';
  const perCase = (shown?.perCase ?? [])
    .map(
      (c: any) =>
        `<tr><td>${esc(c.label)}</td><td class="num">${c.baselineUs.toFixed(1)}</td><td class="num">${c.valueUs.toFixed(1)}</td>` +
        `<td class="num">${c.speedup.toFixed(2)}×</td><td>${c.verdict ? esc(c.verdict) : '<span class="est">estimated</span>'}</td></tr>`,
    )
    .join("");
  const variants = results.variants
    .map(
      (v: any) =>
        `<tr><td>${esc(v.title)}${v.llm ? " (LLM)" : ""}</td><td class="num">${v.speedup.toFixed(2)}×</td>` +
        `<td>${v.measured ? "measured" : '<span class="est">estimated</span>'}</td>` +
        `<td>${
          v.applied
            ? '<b class="applied">applied</b>'
            : v.offered
              ? v.stale
                ? `<span class="muted">withdrawn: ${esc(v.withdrawn ?? "edited since")}</span>`
                : `<button data-id="${esc(v.id)}">Preview</button>`
              : ""
        }</td></tr>`,
    )
    .join("");
  const diff = (shown?.diff ?? "")
    .split("\n")
    .map((l: string) => `<span class="${l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : ""}">${esc(l)}</span>`)
    .join("\n");
  root.innerHTML = `
    <h1>${esc(results.kernel)} <span class="muted">on ${esc(results.device)}</span></h1>
    <p>${best ? `Best: <b>${best.speedup.toFixed(2)}×</b> (${esc(best.origin)})${estimate}` : "No faster variant."}
       Found after ${results.timeToBestS == null ? "–" : results.timeToBestS.toFixed(0) + " s"};
       ${results.candidates.total} candidates in ${results.spent.wall_s.toFixed(0)} s. <span class="muted">${esc(results.stopped)}</span></p>
    <h2>Search trajectory</h2><div class="chart"><canvas id="trajectory"></canvas></div>
    <h2>Candidates</h2><div style="display:flex;gap:32px;flex-wrap:wrap">${counts("reached rung", results.candidates.per_stage)}${counts("outcome", results.candidates.per_outcome)}</div>
    <h2>Variants</h2><table><tr><th>variant</th><th>speedup</th><th></th><th></th></tr>${variants}</table>
    ${shown ? `<h2>${esc(shown.title)}: per case</h2><table><tr><th>case</th><th>original µs</th><th>variant µs</th><th>speedup</th><th>verdict</th></tr>${perCase}</table>
    <h2>Explanation</h2><pre>${esc(shown.explanation)}</pre><h2>Diff</h2><pre>${diff}</pre>` : ""}
    ${results.notes?.length ? `<h2>Notes</h2><ul>${results.notes.map((n: string) => `<li>${esc(n)}</li>`).join("")}</ul>` : ""}`;
  root.querySelectorAll("button[data-id]").forEach((b) =>
    b.addEventListener("click", () => vscode.postMessage({ type: "preview", id: (b as HTMLElement).dataset.id })),
  );
  const fg = themeColor("--vscode-foreground", "#ccc");
  const grid = themeColor("--vscode-panel-border", "#444");
  const accent = themeColor("--vscode-charts-blue", "#3794ff");
  const ok = themeColor("--vscode-charts-green", "#89d185");
  const bad = themeColor("--vscode-charts-red", "#f14c4c");
  const points = results.trajectory as any[];
  chart?.destroy();
  chart = new Chart(document.getElementById("trajectory") as HTMLCanvasElement, {
    type: "line",
    data: {
      datasets: [
        { label: "best so far", data: points.map((p) => ({ x: p.t, y: p.best })), borderColor: accent, stepped: true, pointRadius: 0 },
        {
          type: "scatter",
          label: "verified",
          data: points.filter((p) => p.outcome === "verified" && p.speedup != null).map((p) => ({ x: p.t, y: p.speedup })),
          backgroundColor: ok,
        },
        {
          type: "scatter",
          label: "rejected",
          data: points.filter((p) => p.outcome !== "verified").map((p) => ({ x: p.t, y: p.speedup ?? 1 })),
          backgroundColor: bad,
          pointRadius: 2,
        },
      ],
    },
    options: {
      animation: false,
      maintainAspectRatio: false,
      scales: {
        x: { type: "linear", title: { display: true, text: "seconds", color: fg }, ticks: { color: fg }, grid: { color: grid } },
        y: { title: { display: true, text: `speedup${measured ? "" : " (estimated)"}`, color: fg }, ticks: { color: fg }, grid: { color: grid } },
      },
      plugins: { legend: { labels: { color: fg } } },
    },
  });
}

window.addEventListener("message", (event) => {
  if (event.data?.type === "results") {
    render(event.data.results, event.data.variant);
  }
});
