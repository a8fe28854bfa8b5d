/**
 * Serializes async work per key inside this process (a LevelDB folder has one process): each save
 * reads the state it replaces, so two saves of one network must not interleave.
 *
 * Work on a key nobody holds starts at once (synchronously, no tick); work on a held key starts when
 * the previous work on it settles, whether it succeeded or failed. Work must not start other work on
 * its own key before its first await (that work would not wait for it).
 */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key);
    let result: Promise<T>;
    if (previous === undefined) {
      try {
        result = work();
      } catch (e) {
        result = Promise.reject(e);
      }
    } else {
      result = previous.then(work, work);
    }
    this.tails.set(key, result);
    // Frees the key once the newest work on it settles (the next caller chains on `result` itself,
    // handling its rejection; this reaction handles it for nobody else, so nothing goes unhandled).
    // Two unnamed arrows rather than one named constant: tsx names every function bound to a name
    // with Object.defineProperty, about a microsecond per write.
    result.then(
      () => this.release(key, result),
      () => this.release(key, result),
    );
    return result;
  }

  private release(key: string, result: Promise<unknown>): void {
    if (this.tails.get(key) === result) this.tails.delete(key);
  }
}
