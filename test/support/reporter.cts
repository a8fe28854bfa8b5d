/**
 * The suite's reporter (.mocharc.json "reporter"): mocha's `spec`, with two additions.
 * - Under each failure, the last lines of the logs of the servers the failed test or hook had open
 *   (test/support/logs.ts; in-process servers and processes alike), after the error's stack.
 * - At the end, after spec's summary, the ten slowest tests of the run: each one's time (the test's own,
 *   without its hooks) and its title path.
 * A CommonJS module: mocha loads a reporter with require() and wants the class itself.
 */
import Mocha = require("mocha");

const SHOWN = 10;

interface TestLogRegistry {
  begin(): void;
  failureText(): string;
}

/** test/support/logs.ts's registry, once a test has imported it. */
const logs = (): TestLogRegistry | undefined =>
  (globalThis as Record<symbol, TestLogRegistry | undefined>)[Symbol.for("rock-ts.test-logs")];

const { EVENT_HOOK_BEGIN, EVENT_RUN_END, EVENT_TEST_BEGIN, EVENT_TEST_FAIL, EVENT_TEST_PASS } = Mocha.Runner.constants;

class SpecWithLogs extends Mocha.reporters.Spec {
  constructor(runner: Mocha.Runner, options?: Mocha.MochaOptions) {
    super(runner, options);
    const timed: { readonly title: string; readonly ms: number }[] = [];
    const time = (test: Mocha.Runnable): void => {
      if (test instanceof Mocha.Test && test.duration !== undefined) timed.push({ title: test.titlePath().join(" › "), ms: test.duration });
    };
    runner.on(EVENT_TEST_BEGIN, () => logs()?.begin());
    runner.on(EVENT_HOOK_BEGIN, () => logs()?.begin());
    runner.on(EVENT_TEST_PASS, time);
    // Spec lists failures at the end, each with its error's stack: the logs go there, read now, while
    // the servers of the failed test or hook are still up (and their folders still there).
    runner.on(EVENT_TEST_FAIL, (test: Mocha.Runnable, err: unknown) => {
      time(test);
      const text = logs()?.failureText();
      if (!text || typeof err !== "object" || err === null) return;
      const error = err as { stack?: string; message?: string };
      const indented = text.replace(/^/gm, "    ");
      try {
        error.stack = `${error.stack ?? error.message ?? ""}\n\n${indented}`;
      } catch {
        // a frozen error: its failure shows without the logs
      }
    });
    // After spec's summary (its listener of the same event, registered first).
    runner.once(EVENT_RUN_END, () => {
      if (timed.length === 0) return;
      const slowest = timed.sort((a, b) => b.ms - a.ms).slice(0, SHOWN);
      const width = String(slowest[0]!.ms).length;
      const lines = slowest.map((t) => `    ${String(t.ms).padStart(width)} ms  ${t.title}`);
      Mocha.reporters.Base.consoleLog(`  ${slowest.length} slowest tests:\n\n${lines.join("\n")}\n`);
    });
  }
}

export = SpecWithLogs;
