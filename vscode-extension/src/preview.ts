/**
 * Preview a variant before accepting it: a diff editor between the file and the variant (served
 * from memory under the `kernelbrain-variant` scheme, never written to disk), Accept and Reject
 * in the editor title. Accept runs the server's `kernelbrain.applyVariant` (a versioned edit:
 * refused when the kernel changed since the search), saves the file and closes the preview.
 */
import * as path from "node:path";
import * as vscode from "vscode";
import type { ServerManager } from "./common/server";

export const SCHEME = "kernelbrain-variant";

export interface VariantPreview {
  found: boolean;
  reason?: string;
  id: string;
  kernel: string;
  title: string;
  origin: string;
  speedup: number;
  measured: boolean;
  llm: boolean;
  newText: string | null;
  diff: string;
  explanation: string;
  stale: boolean;
  perCase: { label: string; baselineUs: number; valueUs: number; speedup: number; verdict: string | null }[];
}

interface Pending {
  uri: string;
  kernel: string;
  id: string;
  variantUri: vscode.Uri;
}

export class Previews implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private texts = new Map<string, string>();
  private pending: Pending | undefined;
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly server: ServerManager, private readonly log: vscode.LogOutputChannel) {
    this.disposables.push(
      vscode.workspace.registerTextDocumentContentProvider(SCHEME, this),
      vscode.window.tabGroups.onDidChangeTabs(() => {
        if (this.pending && this.previewTabs().length === 0) {
          void this.clear();
        }
      }),
    );
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? "";
  }

  async open(uri: string, kernel: string, id: string): Promise<VariantPreview | undefined> {
    const preview = await this.server.request<VariantPreview>("kernelbrain/variant", { uri, kernel, id });
    if (!preview?.found) {
      void vscode.window.showWarningMessage(`KernelBrain: ${preview?.reason ?? "the server is not running"}`);
      return undefined;
    }
    if (preview.newText === null || preview.stale) {
      void vscode.window.showWarningMessage(
        `KernelBrain withdrew this variant: ${preview.reason ?? "the kernel changed since the search"}. Run Optimize again.`,
      );
      return undefined;
    }
    const file = vscode.Uri.parse(uri);
    const variantUri = vscode.Uri.from({ scheme: SCHEME, path: file.path, query: `${kernel}/${id}` });
    this.texts.set(variantUri.toString(), preview.newText);
    this.changed.fire(variantUri);
    this.pending = { uri, kernel, id, variantUri };
    await vscode.commands.executeCommand("setContext", "kernelbrain.previewOpen", true);
    const how = preview.measured ? "measured" : "estimated";
    await vscode.commands.executeCommand(
      "vscode.diff",
      file,
      variantUri,
      `${path.basename(file.fsPath)} ↔ ${kernel} variant ${preview.speedup.toFixed(2)}× (${how}, ${preview.origin})`,
      { preview: false },
    );
    this.log.info(`previewing variant ${id} of ${kernel}`);
    return preview;
  }

  async accept(): Promise<boolean> {
    const p = this.pending;
    if (!p) {
      void vscode.window.showInformationMessage("KernelBrain: no variant preview is open.");
      return false;
    }
    const result = await vscode.commands.executeCommand<{ applied: boolean; reason?: string }>(
      "kernelbrain.applyVariant",
      p.uri,
      p.kernel,
      p.id,
    );
    if (!result?.applied) {
      void vscode.window.showWarningMessage(`KernelBrain did not apply the variant: ${result?.reason ?? "no answer"}`);
      return false;
    }
    const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(p.uri));
    await doc.save(); // Accept is the user's explicit word: the file on disk becomes the variant
    await this.close();
    void vscode.window.showInformationMessage(`KernelBrain applied the variant of ${p.kernel}.`);
    return true;
  }

  async reject(): Promise<void> {
    await this.close();
  }

  private previewTabs(): vscode.Tab[] {
    return vscode.window.tabGroups.all
      .flatMap((g) => g.tabs)
      .filter((t) => t.input instanceof vscode.TabInputTextDiff && t.input.modified.scheme === SCHEME);
  }

  private async close(): Promise<void> {
    const tabs = this.previewTabs();
    if (tabs.length) {
      await vscode.window.tabGroups.close(tabs);
    }
    await this.clear();
  }

  private async clear(): Promise<void> {
    if (this.pending) {
      this.texts.delete(this.pending.variantUri.toString());
    }
    this.pending = undefined;
    await vscode.commands.executeCommand("setContext", "kernelbrain.previewOpen", false);
  }

  dispose(): void {
    this.changed.dispose();
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
