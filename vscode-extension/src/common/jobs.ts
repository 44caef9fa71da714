/**
 * The searches of this session, as the server pushes them (`kernelbrain/jobChanged`): one
 * notification per change of a job, so nothing here polls. Free of `vscode` (unit-tested in node).
 */
import { isActive, type Job } from "./status";

export class JobBook {
  private readonly jobs = new Map<string, Job>();
  private readonly listeners = new Set<(job: Job | undefined) => void>();
  private listings = 0; // how many listings replaced the book: a job missing from a newer one is lost

  /** A job's new state; listeners hear of it. */
  apply(job: Job): void {
    if (!job || typeof job.id !== "string") {
      return;
    }
    this.jobs.set(job.id, job);
    this.emit(job);
  }

  /** The server's whole listing (after it started or restarted): jobs it no longer knows are gone. */
  replaceAll(jobs: Job[]): void {
    this.listings += 1;
    this.jobs.clear();
    for (const job of jobs) {
      this.jobs.set(job.id, job);
    }
    this.emit(undefined);
  }

  list(): Job[] {
    return [...this.jobs.values()];
  }

  get(id: string): Job | undefined {
    return this.jobs.get(id);
  }

  /** Called with the job that changed, or undefined when the whole book did. */
  onChange(listener: (job: Job | undefined) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Follows one job until it ends: `progress` hears each change while it runs; resolves with its
   * last state, or with a failure once `lost()` says the server can no longer report it.
   */
  follow(id: string, progress: (job: Job) => void, lost: () => string | undefined): Promise<Job> {
    const listings = this.listings;
    return new Promise((resolve) => {
      const check = () => {
        const job = this.jobs.get(id);
        const why = lost() ?? (!job && this.listings !== listings ? "the server restarted and lost the search" : undefined);
        if (job && !isActive(job)) {
          stop();
          resolve(job);
        } else if (why !== undefined) {
          stop();
          resolve({ id, kernel: job?.kernel ?? "", state: "failed", error: why });
        } else if (job) {
          progress(job);
        }
      };
      const stop = this.onChange((job) => (job === undefined || job.id === id ? check() : undefined));
      check();
    });
  }

  /** Re-checks every follower (the server stopped, say). */
  poke(): void {
    this.emit(undefined);
  }

  private emit(job: Job | undefined): void {
    for (const l of [...this.listeners]) {
      l(job);
    }
  }
}
