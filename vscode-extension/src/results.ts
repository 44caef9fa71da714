/**
 * The results view of one kernel's last search (a webview beside the editor): the trajectory
 * chart, candidates by rung and outcome, per-case speedups (measured or estimated), the
 * explanation and the diff of the variant shown. The page's script and chart.js are bundled in
 * dist/webview (no CDN); a strict content security policy lets nothing else load.
 */
import { randomBytes } from "node:crypto";
import * as vscode from "vscode";
import type { ServerManager } from "./common/server";
import type { VariantPreview } from "./preview";

export class ResultsView implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly server: ServerManager,
  ) {}

  async show(uri: string, kernel: string, variantId?: string, column = vscode.ViewColumn.Beside): Promise<boolean> {
    const results = await this.server.request<any>("kernelbrain/results", { uri, kernel });
    if (!results?.found) {
      void vscode.window.showInformationMessage(`KernelBrain: ${results?.reason ?? "the server is not running"}.`);
      return false;
    }
    const id = variantId ?? results.best ?? results.variants[0]?.id;
    const variant = id
      ? await this.server.request<VariantPreview>("kernelbrain/variant", { uri, kernel, id })
      : undefined;
    if (!this.panel) {
      this.panel = vscode.window.createWebviewPanel(
        "kernelbrain.results",
        `KernelBrain: ${kernel}`,
        { viewColumn: column, preserveFocus: true },
        {
          enableScripts: true,
          localResourceRoots: [vscode.Uri.joinPath(this.context.extensionUri, "dist", "webview")],
        },
      );
      this.panel.onDidDispose(() => (this.panel = undefined));
      this.panel.webview.onDidReceiveMessage((msg) => {
        if (msg?.type === "preview" && typeof msg.id === "string") {
          void vscode.commands.executeCommand("kernelbrain.previewVariant", uri, kernel, msg.id);
        }
      });
      this.panel.webview.html = this.html(this.panel.webview);
    } else {
      this.panel.title = `KernelBrain: ${kernel}`;
      this.panel.reveal(column, true);
    }
    await this.panel.webview.postMessage({ type: "results", results, variant: variant?.found ? variant : null });
    return true;
  }

  private html(webview: vscode.Webview): string {
    const nonce = randomBytes(16).toString("base64");
    const script = webview.asWebviewUri(
      vscode.Uri.joinPath(this.context.extensionUri, "dist", "webview", "results.js"),
    );
    return `<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src ${webview.cspSource} data:; style-src ${webview.cspSource} 'unsafe-inline'; script-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<style>
  body { color: var(--vscode-foreground); background: var(--vscode-editor-background); font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); padding: 0 16px 24px; }
  h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.4em; }
  table { border-collapse: collapse; margin: 4px 0; }
  th, td { border-bottom: 1px solid var(--vscode-panel-border); padding: 3px 10px; text-align: left; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  .est { color: var(--vscode-descriptionForeground); font-style: italic; }
  .chart { position: relative; height: 260px; max-width: 820px; }
  pre { background: var(--vscode-textCodeBlock-background); padding: 8px; overflow-x: auto; font-family: var(--vscode-editor-font-family); }
  .add { color: var(--vscode-gitDecoration-addedResourceForeground); }
  .del { color: var(--vscode-gitDecoration-deletedResourceForeground); }
  .muted { color: var(--vscode-descriptionForeground); }
  button { color: var(--vscode-button-foreground); background: var(--vscode-button-background); border: none; padding: 4px 10px; cursor: pointer; }
</style></head>
<body><div id="root"><p class="muted">Loading…</p></div>
<script nonce="${nonce}" src="${script}"></script></body></html>`;
  }

  dispose(): void {
    this.panel?.dispose();
  }
}
