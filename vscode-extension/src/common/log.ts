/** The extension's log (a LogOutputChannel) and the language client's trace, both scrubbed. */
import * as vscode from "vscode";
import { Redactor, redacting } from "./redact";

export interface Logs {
  log: vscode.LogOutputChannel;
  trace: vscode.OutputChannel;
  redactor: Redactor;
}

export function createLogs(context: vscode.ExtensionContext): Logs {
  const redactor = new Redactor();
  const log = redacting(vscode.window.createOutputChannel("KernelBrain", { log: true }), redactor);
  const trace = redacting(vscode.window.createOutputChannel("KernelBrain Trace"), redactor);
  context.subscriptions.push(log, trace);
  return { log, trace, redactor };
}
