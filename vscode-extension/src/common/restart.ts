/**
 * When a dead server is started again: at most `limit` times within a window (3 minutes), so a
 * server that crashes on start does not spin. Free of `vscode`; the clock is injected.
 */

export const RESTART_WINDOW_MS = 3 * 60 * 1000;

export class RestartBudget {
  private restarts: number[] = [];

  constructor(
    private readonly limit: number,
    private readonly now: () => number = Date.now,
    private readonly windowMs: number = RESTART_WINDOW_MS,
  ) {}

  /** Whether one more restart is allowed now (and count it if so). */
  take(): boolean {
    const t = this.now();
    this.restarts = this.restarts.filter((r) => t - r < this.windowMs);
    if (this.restarts.length >= this.limit) {
      return false;
    }
    this.restarts.push(t);
    return true;
  }

  reset(): void {
    this.restarts = [];
  }
}
