/** How a stream ended: undefined when it completed, its error, or `gaveUp` when its reader left. */
export type StreamEnd = { readonly error: unknown } | undefined | "gaveUp";

/**
 * `source`, calling `end` once when it completes, fails or is given up (its reader called return());
 * `end` may answer an error to raise instead of how it completed or failed. An iterator object rather
 * than a generator: a generator given up before its first step skips its `finally`.
 */
export function onStreamEnd<T>(source: AsyncIterable<T>, end: (how: StreamEnd) => Error | undefined): AsyncIterable<T> {
  let ended = false;
  const finish = (how: StreamEnd): Error | undefined => {
    if (ended) return undefined;
    ended = true;
    return end(how);
  };
  return {
    [Symbol.asyncIterator](): AsyncIterator<T> {
      const it = source[Symbol.asyncIterator]();
      return {
        async next() {
          let r: IteratorResult<T>;
          try {
            r = await it.next();
          } catch (error) {
            throw finish({ error }) ?? error;
          }
          if (r.done) {
            const instead = finish(undefined);
            if (instead) throw instead;
          }
          return r;
        },
        async return() {
          finish("gaveUp");
          return (await it.return?.()) ?? { done: true, value: undefined };
        },
      };
    },
  };
}
