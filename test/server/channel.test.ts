import { expect } from "chai";
import { Channel } from "../../src/channel.js";

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

describe("Channel", () => {
  it("hands items pushed before and while the consumer waits, in order, then ends on close", async () => {
    const channel = new Channel<number>();
    channel.push(1);
    const read = collect(channel);
    channel.push(2);
    await Promise.resolve();
    channel.push(3);
    channel.close();
    expect(await read).to.deep.equal([1, 2, 3]);
    expect(channel.push(4)).to.equal(false);
  });

  it("fails after the items queued before the failure", async () => {
    const channel = new Channel<number>();
    channel.push(1);
    channel.fail(new Error("broken"));
    channel.fail(new Error("second"));
    const seen: number[] = [];
    let error: unknown;
    try {
      for await (const item of channel) seen.push(item);
    } catch (e) {
      error = e;
    }
    expect(seen).to.deep.equal([1]);
    expect((error as Error).message).to.equal("broken");
  });

  it("rejects a waiting consumer on failure", async () => {
    const channel = new Channel<number>();
    const next = channel[Symbol.asyncIterator]().next();
    channel.fail(new Error("gone"));
    let error: unknown;
    await next.catch((e: unknown) => (error = e));
    expect((error as Error).message).to.equal("gone");
  });

  it("pause: asks the producer to pause at capacity and to resume at half, when waiting, and when given up", async () => {
    let drains = 0;
    const channel = new Channel<number>({ capacity: 4, overflow: "pause", onDrain: () => drains++ });
    expect([1, 2, 3].map((n) => channel.push(n))).to.deep.equal([true, true, true]);
    expect(channel.push(4)).to.equal(false);
    const it = channel[Symbol.asyncIterator]();
    await it.next();
    expect(drains).to.equal(0);
    await it.next();
    expect(drains).to.equal(1);
    await it.next();
    await it.next();
    const waiting = it.next();
    expect(drains).to.equal(2);
    channel.push(5);
    expect(await waiting).to.deep.equal({ value: 5, done: false });
    channel.push(6);
    await it.return!();
    expect(drains).to.equal(3);
    expect(channel.closed).to.equal(true);
    expect(await it.next()).to.deep.equal({ value: undefined, done: true });
  });

  it("drop-oldest: keeps the newest `capacity` items and counts what it dropped", async () => {
    const channel = new Channel<number>({ capacity: 3, overflow: "drop-oldest" });
    for (let n = 1; n <= 5; n++) expect(channel.push(n)).to.equal(true);
    channel.close();
    expect(channel.takeDropped()).to.equal(2);
    expect(channel.takeDropped()).to.equal(0);
    expect(await collect(channel)).to.deep.equal([3, 4, 5]);
  });

  it("ends at once with the signal's reason when the consumer's signal aborts, queued items discarded", async () => {
    const controller = new AbortController();
    const channel = new Channel<number>({ signal: controller.signal });
    channel.push(1);
    const it = channel[Symbol.asyncIterator]();
    expect(await it.next()).to.deep.equal({ value: 1, done: false });
    const waiting = it.next();
    const reason = new Error("deadline");
    controller.abort(reason);
    expect(
      await waiting.then(
        () => "resolved",
        (e: unknown) => e,
      ),
    ).to.equal(reason);
    expect(channel.push(2)).to.equal(false);

    const queued = new AbortController();
    const full = new Channel<number>({ signal: queued.signal });
    full.push(1);
    full.push(2);
    queued.abort(reason);
    expect(
      await collect(full).then(
        () => "resolved",
        (e: unknown) => e,
      ),
    ).to.equal(reason);

    const aborted = new Channel<number>({ signal: AbortSignal.abort(reason) });
    expect(aborted.push(1)).to.equal(false);
    expect(
      await collect(aborted).then(
        () => "resolved",
        (e: unknown) => e,
      ),
    ).to.equal(reason);
  });

  it("ends quietly when the consumer stops iterating", async () => {
    const channel = new Channel<number>({ signal: new AbortController().signal });
    channel.push(1);
    channel.push(2);
    for await (const item of channel) {
      expect(item).to.equal(1);
      break;
    }
    expect(channel.closed).to.equal(true);
    expect(channel.push(3)).to.equal(false);
  });

  it("lets go of the signal once closed", () => {
    const controller = new AbortController();
    let listeners = 0;
    const signal = controller.signal;
    const add = signal.addEventListener.bind(signal);
    const remove = signal.removeEventListener.bind(signal);
    signal.addEventListener = ((...args: Parameters<typeof add>) => {
      listeners++;
      add(...args);
    }) as typeof signal.addEventListener;
    signal.removeEventListener = ((...args: Parameters<typeof remove>) => {
      listeners--;
      remove(...args);
    }) as typeof signal.removeEventListener;
    const channel = new Channel<number>({ signal });
    expect(listeners).to.equal(1);
    channel.close();
    expect(listeners).to.equal(0);
  });
});
