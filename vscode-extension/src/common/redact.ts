/**
 * Secrets never reach a log: every line the extension writes (its own log and the language
 * client's trace, which prints whole messages, the initialization options and
 * kernelbrain/setApiKey included) passes through a Redactor that knows the stored key.
 * Free of `vscode`.
 */

const MASK = "[redacted]";

export class Redactor {
  private secrets = new Set<string>();

  /** Forget the previous key (if any) and mask this one from now on. */
  set(secret: string | undefined, previous?: string): void {
    if (previous) {
      this.secrets.delete(previous);
    }
    if (secret && secret.length >= 4) {
      this.secrets.add(secret);
    }
  }

  scrub(text: string): string {
    let out = text;
    for (const secret of this.secrets) {
      // the key as written, and as JSON escapes it inside a logged message
      for (const form of new Set([secret, JSON.stringify(secret).slice(1, -1)])) {
        out = out.split(form).join(MASK);
      }
    }
    // keys the extension was never told about still look like keys
    return out.replace(/\b(sk-[A-Za-z0-9_-]{8,})/g, MASK);
  }
}

/** A line sink (an output channel) whose every write is scrubbed first. */
export interface Sink {
  append(value: string): void;
  appendLine(value: string): void;
}

export function redacting<T extends Sink>(sink: T, redactor: Redactor): T {
  return new Proxy(sink, {
    get(target, prop, receiver) {
      if (prop === "append" || prop === "appendLine" || prop === "replace") {
        return (value: string) => (target as any)[prop](redactor.scrub(String(value)));
      }
      for (const level of ["trace", "debug", "info", "warn", "error"]) {
        if (prop === level) {
          return (message: unknown, ...args: unknown[]) =>
            (target as any)[prop](
              redactor.scrub(message instanceof Error ? String(message.stack ?? message) : String(message)),
              ...args.map((a) => redactor.scrub(typeof a === "string" ? a : JSON.stringify(a) ?? "")),
            );
        }
      }
      const value = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** Whether a key the user typed is worth storing (a message otherwise). */
export function apiKeyProblem(key: string): string | undefined {
  if (key.trim() !== key) {
    return "The key has leading or trailing spaces.";
  }
  if (/\s/.test(key)) {
    return "The key contains whitespace.";
  }
  if (key.length < 8) {
    return "The key is too short.";
  }
  return undefined;
}
