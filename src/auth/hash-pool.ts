import os from "node:os";
import { Worker } from "node:worker_threads";

const WORKER_URL = new URL("./hash-worker.js", import.meta.url);

/** The queue is full: the caller should answer "too many attempts" rather than wait. */
export class HashPoolFull extends Error {}

export interface HashPoolOptions {
  /** Worker threads; <= 0: one per core but one, which stays with the event loop and R. */
  readonly workers: number;
  /** Checks that may wait for a free worker; past it `verify` rejects with HashPoolFull. */
  readonly maxQueue: number;
}

interface Task {
  readonly stored: string | null;
  readonly presented: string;
  resolve(ok: boolean): void;
  reject(err: Error): void;
}

type Answer = { readonly ok: boolean } | { readonly error: string };

interface Slot {
  readonly worker: Worker;
  task: Task | undefined;
}

/**
 * Password checks in worker threads (hash-worker.js), so that bcrypt never holds the event loop:
 * every other request keeps being served while credentials are checked. Workers start on demand and
 * do not keep the process alive while idle.
 */
export class HashPool {
  private readonly size: number;
  private readonly slots: Slot[] = [];
  private readonly queue: Task[] = [];
  private closed = false;

  constructor(private readonly opts: HashPoolOptions) {
    this.size = opts.workers > 0 ? opts.workers : Math.max(1, os.availableParallelism() - 1);
  }

  /** Whether `presented` matches `stored` (`null`: an unknown user, which costs the same and never matches). */
  verify(stored: string | null, presented: string): Promise<boolean> {
    if (this.closed) return Promise.reject(new Error("the password checker is closed"));
    return new Promise((resolve, reject) => {
      const task: Task = { stored, presented, resolve, reject };
      const slot = this.slots.find((s) => s.task === undefined) ?? (this.slots.length < this.size ? this.spawn() : undefined);
      if (slot) this.run(slot, task);
      else if (this.queue.length < this.opts.maxQueue) this.queue.push(task);
      else reject(new HashPoolFull(`${this.queue.length} password checks are already waiting`));
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.queue.splice(0)) t.reject(new Error("the password checker is closed"));
    await Promise.all(this.slots.map((s) => s.worker.terminate()));
  }

  private spawn(): Slot {
    const slot: Slot = { worker: new Worker(WORKER_URL), task: undefined };
    slot.worker.on("message", (a: Answer) => {
      const task = slot.task;
      slot.task = undefined;
      if ("error" in a) task?.reject(new Error(a.error));
      else task?.resolve(a.ok);
      this.next(slot);
    });
    const lost = (err: Error) => {
      const i = this.slots.indexOf(slot);
      if (i < 0) return;
      this.slots.splice(i, 1);
      slot.task?.reject(err);
      slot.task = undefined;
      const waiting = this.queue.shift();
      if (waiting && !this.closed) this.run(this.spawn(), waiting);
    };
    slot.worker.once("error", lost);
    slot.worker.once("exit", (code) => lost(new Error(`a password checking thread exited (${code})`)));
    this.slots.push(slot);
    return slot;
  }

  private run(slot: Slot, task: Task): void {
    slot.task = task;
    slot.worker.ref();
    slot.worker.postMessage({ stored: task.stored, presented: task.presented });
  }

  private next(slot: Slot): void {
    const task = this.queue.shift();
    if (task) this.run(slot, task);
    else slot.worker.unref();
  }
}
