/**
 * A one-consumer channel from push-style producers (sockets, busboy, callbacks) to an async iterator.
 *
 * Memory stays bounded for a fast producer in one of two ways, chosen by `overflow`:
 * - "pause" (with `capacity`): push() returns false once `capacity` items wait, and `onDrain` tells
 *   the producer to resume (half empty, waiting for more, or given up by the consumer);
 * - "drop-oldest": past `capacity` the oldest item is dropped, and `takeDropped()` tells how many, for a
 *   reader that can lose data but must know it did (a log follower).
 * Without `capacity` it is unbounded, for producers bounded by other means.
 *
 * The producer ends it with close() (queued items are still read) or fail() (queued items, then the
 * error). `signal` is the consumer leaving: queued items are discarded and the iteration ends at once
 * with the signal's reason, so that a stream cut by its deadline ends as DEADLINE_EXCEEDED, not as if
 * it had completed. A consumer that stops iterating (break, return) ends it quietly.
 */
export interface ChannelOptions {
  readonly capacity?: number;
  readonly overflow?: "pause" | "drop-oldest";
  /** "pause": the producer may send again. */
  readonly onDrain?: () => void;
  readonly signal?: AbortSignal;
}

interface Waiter<T> {
  readonly resolve: (result: IteratorResult<T, undefined>) => void;
  readonly reject: (error: unknown) => void;
}

const DONE: IteratorReturnResult<undefined> = { value: undefined, done: true };

export class Channel<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiter: Waiter<T> | undefined;
  private ended = false;
  private failure: { readonly error: unknown } | undefined;
  private dropped = 0;
  private readonly capacity: number;
  private readonly onAbort = (): void => this.abandon();

  constructor(private readonly options: ChannelOptions = {}) {
    this.capacity = options.capacity ?? Infinity;
    if (options.signal?.aborted) this.abandon();
    else options.signal?.addEventListener("abort", this.onAbort, { once: true });
  }

  /** Ended, failed, or given up by the consumer: further pushes are dropped. */
  get closed(): boolean {
    return this.ended;
  }

  /** False when the item was dropped (closed) or, "pause", when the producer should wait for onDrain. */
  push(item: T): boolean {
    if (this.ended) return false;
    if (this.waiter) {
      this.settle().resolve({ value: item, done: false });
      return true;
    }
    this.items.push(item);
    if (this.options.overflow === "drop-oldest") {
      if (this.items.length > this.capacity) {
        this.items.shift();
        this.dropped++;
      }
      return true;
    }
    return this.items.length < this.capacity;
  }

  close(): void {
    this.ended = true;
    this.detach();
    if (this.waiter && this.items.length === 0) this.settle().resolve(DONE);
  }

  fail(error: unknown): void {
    if (this.ended) return;
    this.failure = { error };
    this.ended = true;
    this.detach();
    if (this.waiter) this.settle().reject(error);
  }

  /** Items "drop-oldest" dropped since the last call. */
  takeDropped(): number {
    const dropped = this.dropped;
    this.dropped = 0;
    return dropped;
  }

  [Symbol.asyncIterator](): AsyncIterator<T, undefined> {
    return {
      next: () => this.next(),
      return: () => {
        this.discard();
        return Promise.resolve(DONE);
      },
    };
  }

  private next(): Promise<IteratorResult<T, undefined>> {
    if (this.items.length > 0) {
      const value = this.items.shift()!;
      if (this.items.length === Math.floor(this.capacity / 2)) this.drained();
      return Promise.resolve({ value, done: false });
    }
    if (this.failure) return Promise.reject(this.failure.error);
    if (this.ended) return Promise.resolve(DONE);
    this.drained();
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }

  /** The consumer's signal aborted: as discard(), and the iteration ends with the signal's reason. */
  private abandon(): void {
    this.items.length = 0;
    this.fail(this.options.signal?.reason);
    this.drained();
  }

  /** The consumer is gone: nothing queued will be read, and a paused producer resumes to drop the rest. */
  private discard(): void {
    this.items.length = 0;
    this.failure = undefined;
    this.close();
    this.drained();
  }

  private drained(): void {
    if (this.options.overflow !== "drop-oldest") this.options.onDrain?.();
  }

  private settle(): Waiter<T> {
    const waiter = this.waiter!;
    this.waiter = undefined;
    return waiter;
  }

  private detach(): void {
    this.options.signal?.removeEventListener("abort", this.onAbort);
  }
}
