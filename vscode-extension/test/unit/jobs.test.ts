import assert from "node:assert/strict";
import { test } from "node:test";
import { JobBook } from "../../src/common/jobs";

test("a followed job reports each pushed change and resolves when it ends", async () => {
  const book = new JobBook();
  const seen: number[] = [];
  const done = book.follow("j1", (job) => seen.push(job.fraction ?? 0), () => undefined);
  book.apply({ id: "j1", kernel: "k", state: "queued" });
  book.apply({ id: "j2", kernel: "other", state: "running", fraction: 0.9 }); // not followed
  book.apply({ id: "j1", kernel: "k", state: "running", fraction: 0.25 });
  book.apply({ id: "j1", kernel: "k", state: "running", fraction: 0.5 });
  book.apply({ id: "j1", kernel: "k", state: "finished", fraction: 1, best_speedup: 2.1 });
  const job = await done;
  assert.equal(job.state, "finished");
  assert.equal(job.best_speedup, 2.1);
  assert.deepEqual(seen, [0, 0.25, 0.5]);
  assert.equal(book.list().length, 2);
});

test("a job the server can no longer report ends as failed, with the reason", async () => {
  const book = new JobBook();
  let lost: string | undefined;
  const done = book.follow("j1", () => undefined, () => lost);
  book.apply({ id: "j1", kernel: "k", state: "running" });
  lost = "the server stopped";
  book.poke();
  const job = await done;
  assert.equal(job.state, "failed");
  assert.equal(job.error, "the server stopped");
});

test("a listing replaces the book; malformed pushes are ignored", () => {
  const book = new JobBook();
  book.apply({ id: "old", kernel: "k", state: "finished" });
  book.apply(null as any);
  book.replaceAll([{ id: "new", kernel: "k", state: "queued" }]);
  assert.deepEqual(
    book.list().map((j) => j.id),
    ["new"],
  );
});

test("a job missing from a later listing (a restarted server) ends as failed", async () => {
  const book = new JobBook();
  const done = book.follow("j1", () => undefined, () => undefined);
  book.apply({ id: "j1", kernel: "k", state: "running" });
  book.replaceAll([]);
  const job = await done;
  assert.equal(job.state, "failed");
  assert.match(job.error ?? "", /restarted/);
});
