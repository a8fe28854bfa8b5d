/**
 * A request stream that holds one message, known when the call begins (a server stream's request, as
 * this server's own transports hand it to the interceptors): an interceptor may read `message` rather
 * than iterate it, which would take a wrapper of the stream per call.
 */
export class OneMessage<T> implements AsyncIterable<T> {
  constructor(readonly message: T) {}

  [Symbol.asyncIterator](): AsyncIterator<T> {
    let given = false;
    return {
      next: () => {
        if (given) return Promise.resolve({ done: true, value: undefined });
        given = true;
        return Promise.resolve({ done: false, value: this.message });
      },
    };
  }
}
