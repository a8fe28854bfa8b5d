/**
 * A one-consumer queue that turns push-style events (busboy, sockets) into an AsyncIterable, telling
 * the producer when to pause so that a fast sender cannot fill memory.
 */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiting: ((r: IteratorResult<T>) => void) | undefined;
  private failWaiting: ((e: unknown) => void) | undefined;
  private ended = false;
  private error: unknown;
  private hasError = false;

  constructor(
    private readonly highWater: number,
    private readonly onDrain: () => void,
  ) {}

  /** Returns false when the producer should pause until `onDrain`. */
  push(item: T): boolean {
    if (this.ended) return false;
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = this.failWaiting = undefined;
      w({ value: item, done: false });
      return true;
    }
    this.items.push(item);
    return this.items.length < this.highWater;
  }

  /** Ended, failed, or given up by the consumer: further pushes are dropped. */
  get closed(): boolean {
    return this.ended;
  }

  end(): void {
    this.ended = true;
    this.wake();
  }

  fail(error: unknown): void {
    if (this.ended) return;
    this.hasError = true;
    this.error = error;
    this.ended = true;
    if (this.failWaiting) {
      const f = this.failWaiting;
      this.waiting = this.failWaiting = undefined;
      f(error);
    }
  }

  private wake(): void {
    if (this.waiting && this.items.length === 0) {
      const w = this.waiting;
      this.waiting = this.failWaiting = undefined;
      w({ value: undefined, done: true });
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.items.length > 0) {
          const value = this.items.shift()!;
          if (this.items.length === Math.floor(this.highWater / 2)) this.onDrain();
          return Promise.resolve({ value, done: false });
        }
        if (this.hasError) return Promise.reject(this.error);
        if (this.ended) return Promise.resolve({ value: undefined, done: true });
        this.onDrain();
        return new Promise((resolve, reject) => {
          this.waiting = resolve;
          this.failWaiting = reject;
        });
      },
      return: () => {
        this.ended = true;
        this.items.length = 0;
        // A paused producer resumes to drop what it still receives instead of stalling its source.
        this.onDrain();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
